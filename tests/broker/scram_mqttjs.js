// A SCRAM login with mqtt.js, a third-party MQTT 5 client that speaks AUTH (its `handleAuth`
// hook answers the broker's AUTH 0x18), the SCRAM client side computed with node's crypto.
// Usage: node scram_mqttjs.js URL METHOD USER PASSWORD. Prints `OK ...` after a message went
// through the broker to this client, `ERROR <reason code> ...` when the CONNECT is refused.
const mqtt = require('mqtt');
const crypto = require('crypto');

const [url, method, user, password] = process.argv.slice(2);
const algorithm = method === 'SCRAM-SHA-512' ? 'sha512' : 'sha256';
const keyLength = algorithm === 'sha512' ? 64 : 32;
const nonce = crypto.randomBytes(18).toString('base64');
const firstBare = `n=${user},r=${nonce}`;
let expectedServerFinal = null;

const hmac = (key, data) => crypto.createHmac(algorithm, key).update(data).digest();

function clientFinal(serverFirst) {
  const attributes = Object.fromEntries(serverFirst.split(',').map((a) => [a[0], a.slice(2)]));
  if (!attributes.r.startsWith(nonce)) throw new Error('server-first does not extend our nonce');
  const salt = Buffer.from(attributes.s, 'base64');
  const salted = crypto.pbkdf2Sync(password, salt, parseInt(attributes.i, 10), keyLength, algorithm);
  const clientKey = hmac(salted, 'Client Key');
  const storedKey = crypto.createHash(algorithm).update(clientKey).digest();
  const withoutProof = `c=biws,r=${attributes.r}`;
  const authMessage = `${firstBare},${serverFirst},${withoutProof}`;
  const signature = hmac(storedKey, authMessage);
  const proof = Buffer.from(clientKey.map((byte, i) => byte ^ signature[i]));
  expectedServerFinal = 'v=' + hmac(hmac(salted, 'Server Key'), authMessage).toString('base64');
  return `${withoutProof},p=${proof.toString('base64')}`;
}

const client = mqtt.connect(url, {
  protocolVersion: 5,
  clientId: `mqttjs-${user}`,
  reconnectPeriod: 0,
  connectTimeout: 5000,
  properties: {
    authenticationMethod: method,
    authenticationData: Buffer.from(`n,,${firstBare}`),
  },
});

client.handleAuth = (packet, callback) => {
  const data = clientFinal(packet.properties.authenticationData.toString());
  callback(null, {
    cmd: 'auth',
    reasonCode: 0x18,
    properties: { authenticationMethod: method, authenticationData: Buffer.from(data) },
  });
};

const topic = `users/${user}/mqttjs`;
client.on('connect', (connack) => {
  const serverFinal = connack.properties?.authenticationData?.toString();
  if (serverFinal !== expectedServerFinal) {
    console.log(`BAD-SERVER-FINAL ${serverFinal}`);
    process.exit(3);
  }
  client.subscribe(topic, { qos: 1 }, (error) => {
    if (error) {
      console.log(`SUBSCRIBE-FAILED ${error.message}`);
      process.exit(5);
    }
    client.publish(topic, 'hello from mqtt.js', { qos: 1 });
  });
});
client.on('message', (received, payload) => {
  console.log(`OK ${received} ${payload}`);
  client.end(() => process.exit(0));
});
client.on('error', (error) => {
  console.log(`ERROR ${error.code ?? ''} ${error.message}`);
  process.exit(2);
});
setTimeout(() => {
  console.log('TIMEOUT');
  process.exit(4);
}, 10000);
