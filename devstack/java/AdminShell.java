// A line-oriented HBase admin for the devstack's tests: the calls Thrift does not have.
//
// Thrift1 and Thrift2 offer no memstore flush and no way to wait for a compaction, and the
// sink's guarantee rests on what flushes and compactions keep (VERSIONS, delete markers).
// Reads commands from stdin, one per line, answers "@@ok" or "@@error <text>" on stdout
// (HBase's client logs to stdout too: answers are the lines that start with "@@"):
//   flush <table>           flush every region's memstore (synchronous)
//   compact <table>         minor compaction, waited for
//   major_compact <table>   major compaction, waited for
// The conf dir with hbase-site.xml leads the classpath (ZooKeeper's address).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.CompactionState;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;

public final class AdminShell {
  public static void main(String[] args) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    try (Connection conn = ConnectionFactory.createConnection(conf); Admin admin = conn.getAdmin()) {
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      System.out.println("@@ready");
      System.out.flush();
      String line;
      while ((line = in.readLine()) != null) {
        String[] parts = line.trim().split("\\s+");
        try {
          TableName table = TableName.valueOf(parts[1]);
          switch (parts[0]) {
            case "flush":
              admin.flush(table);
              break;
            case "compact":
              admin.compact(table);
              waitForCompaction(admin, table);
              break;
            case "major_compact":
              admin.majorCompact(table);
              waitForCompaction(admin, table);
              break;
            default:
              throw new IllegalArgumentException("unknown command " + parts[0]);
          }
          System.out.println("@@ok");
        } catch (Exception e) {
          System.out.println("@@error " + e.toString().replace('\n', ' '));
        }
        System.out.flush();
      }
    }
  }

  // A compaction request returns at once: poll until the regions report none running.
  // The state shows the request only once a region picks it up, so first wait (briefly)
  // for it to start, then for it to end.
  private static void waitForCompaction(Admin admin, TableName table) throws Exception {
    long start = System.nanoTime();
    while (admin.getCompactionState(table) == CompactionState.NONE && System.nanoTime() - start < 2_000_000_000L) {
      Thread.sleep(20);
    }
    long deadline = System.nanoTime() + 120_000_000_000L;
    while (admin.getCompactionState(table) != CompactionState.NONE) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("compaction of " + table + " still running after 120 s");
      }
      Thread.sleep(50);
    }
  }
}
