// Preload (`node -r ./force_loopback.cjs ...`) for servers that listen on every interface:
// binds any listen() that names no host to 127.0.0.1, and prints `LISTENING <port>` on stderr
// once bound, so tests can use PORT=0 and never race for a port.
"use strict";
const net = require("net");
const original = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  const portOnly = typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first));
  if (portOnly && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  } else if (first && typeof first === "object" && !first.path && !first.host) {
    args[0] = { ...first, host: "127.0.0.1" };
  }
  this.once("listening", () => {
    const addr = this.address();
    if (addr && typeof addr === "object") {
      process.stderr.write(`LISTENING ${addr.port}\n`);
    }
  });
  return original.apply(this, args);
};
