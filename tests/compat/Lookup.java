// Test infrastructure for tests/integration/compat.rs: Java's InetAddress.getAllByName (the C library's
// getaddrinfo through the JDK) and the JNDI DNS provider for SRV (it reads resolv.conf's
// nameservers). For each case one line: the milliseconds it took, a tab, the answer
// space-separated, or `error` and the message.
//   host:NAME  InetAddress.getAllByName(NAME)
//   srv:NAME   JNDI "dns:" SRV attributes of NAME, as "port:target"
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Hashtable;
import java.util.List;
import javax.naming.directory.Attribute;
import javax.naming.directory.InitialDirContext;

public class Lookup {
  public static void main(String[] args) throws Exception {
    // The JDK caches lookups, positive ones forever by default: each case must reach DNS.
    java.security.Security.setProperty("networkaddress.cache.ttl", "0");
    java.security.Security.setProperty("networkaddress.cache.negative.ttl", "0");
    for (String c : args) {
      int i = c.indexOf(':');
      String kind = c.substring(0, i), name = c.substring(i + 1);
      long start = System.nanoTime();
      String line;
      try {
        List<String> out = new ArrayList<>();
        if (kind.equals("host")) {
          for (InetAddress a : InetAddress.getAllByName(name)) {
            String s = a.getHostAddress();
            if (!out.contains(s)) out.add(s);
          }
        } else if (kind.equals("srv")) {
          Hashtable<String, String> env = new Hashtable<>();
          env.put("java.naming.factory.initial", "com.sun.jndi.dns.DnsContextFactory");
          Attribute srv = new InitialDirContext(env).getAttributes("dns:/" + name, new String[] {"SRV"}).get("SRV");
          for (int k = 0; srv != null && k < srv.size(); k++) {
            String[] f = srv.get(k).toString().split(" ");
            out.add(f[2] + ":" + f[3].toLowerCase().replaceAll("\\.$", ""));
          }
        } else {
          throw new IllegalArgumentException("unsupported case " + c);
        }
        line = String.join(" ", out);
      } catch (Exception e) {
        line = "error\t" + e.getClass().getSimpleName() + " " + String.valueOf(e.getMessage()).replace('\n', ' ');
      }
      System.out.printf("%.3f\t%s%n", (System.nanoTime() - start) / 1e6, line);
    }
  }
}
