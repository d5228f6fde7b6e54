// A TLS terminator for the tests, in front of a plain TCP server:
//
//   node tls-front.mjs CERT KEY HOST PORT TARGET_HOST TARGET_PORT
//
// Serves TLS (HTTP/1.1 by ALPN) on HOST:PORT (0: a free port) with CERT and KEY (PEM), and
// pipes each connection's plaintext to TARGET_HOST:TARGET_PORT. Prints `listening HOST:PORT`
// once ready, then one JSON line per connection when it closes: {"bytes_in": N} (plaintext
// bytes the client sent through it, 0 when no request got past the handshake).
import { readFileSync } from "node:fs";
import net from "node:net";
import tls from "node:tls";

const [cert, key, host, port, targetHost, targetPort] = process.argv.slice(2);
if (!targetPort) {
  console.error("usage: tls-front.mjs CERT KEY HOST PORT TARGET_HOST TARGET_PORT");
  process.exit(2);
}
const server = tls.createServer(
  { cert: readFileSync(cert), key: readFileSync(key), ALPNProtocols: ["http/1.1"] },
  (socket) => {
    let bytesIn = 0;
    const upstream = net.connect(Number(targetPort), targetHost);
    socket.on("data", (chunk) => {
      bytesIn += chunk.length;
    });
    socket.pipe(upstream).pipe(socket);
    let reported = false;
    const close = () => {
      socket.destroy();
      upstream.destroy();
      if (!reported) {
        reported = true;
        process.stdout.write(JSON.stringify({ bytes_in: bytesIn }) + "\n");
      }
    };
    for (const side of [socket, upstream]) {
      side.on("error", close);
      side.on("close", close);
    }
  },
);
server.on("tlsClientError", (err) => console.error("tls-front:", err.message));
server.listen(Number(port), host, () => {
  process.stdout.write(`listening ${host}:${server.address().port}\n`);
});
