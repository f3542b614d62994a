// Preload (`node -r ./force_loopback.cjs ...`) for servers that listen on every interface:
// binds any listen() that names no host to 127.0.0.1, and prints `LISTENING <port>` on stderr
// once bound, so tests can use PORT=0 and never race for a port. The host is filled in where
// Node binds (`_listen2`), not by adding one to listen()'s arguments: a named host makes the
// bind wait for a DNS lookup, and servers that read address() right after listen(0) (the
// conformance harness's scenarios) would read null.
"use strict";
const net = require("net");
const bind = net.Server.prototype._listen2;
net.Server.prototype._listen2 = function (address, port, addressType, ...rest) {
  if (!address && port !== undefined && port !== null && port >= 0) {
    address = "127.0.0.1";
    addressType = 4;
  }
  return bind.call(this, address, port, addressType, ...rest);
};
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  this.once("listening", () => {
    const addr = this.address();
    if (addr && typeof addr === "object") {
      process.stderr.write(`LISTENING ${addr.port}\n`);
    }
  });
  return listen.apply(this, args);
};
