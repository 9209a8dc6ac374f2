// A pg_tx session driven by the official TypeScript MCP SDK, without any routing header:
// begin, insert, commit. runner/fleet runs it through a proxy that spreads calls round-robin over
// several replicas, so each call may reach a replica that does not hold the session.
//
// Usage: node session-client.mjs URL TABLE ID   (prints one JSON object: each step's isError and text)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, table, id] = process.argv.slice(2);
if (!url || !table || !id) {
  console.error("usage: node session-client.mjs URL TABLE ID");
  process.exit(2);
}
const client = new Client({ name: "pgtools-ts-session", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  const text = r.content?.map((c) => c.text).join("") ?? "";
  return { isError: r.isError ?? false, text };
};
const begin = await call("pg_tx", { action: "begin" });
const sessionId = begin.isError ? "" : JSON.parse(begin.text).session_id;
const insert = await call("insert_data", { table, row: { id: Number(id), name: "ts " + id }, session_id: sessionId });
const commit = await call("pg_tx", { action: "commit", session_id: sessionId });
console.log(JSON.stringify({ sessionId, begin, insert, commit }));
await client.close();
