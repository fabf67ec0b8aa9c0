// aedes-peer: the aedes broker (Node.js) as a benchmark peer for RingMQ's scenario suite.
// Usage: node server.mjs HOST PORT   (loopback only; anonymous; in-memory persistence;
// queue, in-flight and client-id limits raised so the broker is not handicapped by defaults)
import net from 'node:net'
import { Aedes } from 'aedes'

const host = process.argv[2] || '127.0.0.1'
const port = Number(process.argv[3] || 1883)

const broker = await Aedes.createBroker({
  queueLimit: 100000,
  maxInflightInbound: 0,
  maxClientsIdLength: 256,
  drainTimeout: 0
})
const server = net.createServer(broker.handle)
server.listen(port, host)
const stop = () => server.close(() => broker.close(() => process.exit(0)))
process.on('SIGINT', stop)
process.on('SIGTERM', stop)
