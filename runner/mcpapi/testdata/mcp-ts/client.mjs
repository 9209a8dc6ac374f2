// A second, independent MCP client for the pgtools tests: the official TypeScript SDK connects
// to /mcp over Streamable HTTP with a bearer token, lists the tools, makes a few calls and prints
// one JSON object with what it saw. runner/mcpapi/mcp_ts_test.go runs it and asserts on that output.
//
// Usage: node client.mjs URL TOKEN   (exit 0 with a report; exit 1 with {"connectError": …, "code": HTTP status})
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
if (!url) {
  console.error("usage: node client.mjs URL TOKEN");
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token ?? ""}` } },
});
const client = new Client({ name: "pgtools-ts-test", version: "1.0.0" });
try {
  await client.connect(transport);
} catch (err) {
  console.log(JSON.stringify({ connectError: String(err?.message ?? err), code: err?.code }));
  process.exit(1);
}

// What a model would see of a call: the flag, the structured object and the text.
const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  return { isError: r.isError ?? false, structured: r.structuredContent, text: r.content?.map((c) => c.text) };
};

const listed = await client.listTools();
const { tools } = listed;
const report = {
  // The cache hints and catalog digest of tools/list, as this client's SDK hands them on.
  listHints: { ttlMs: listed.ttlMs, cacheScope: listed.cacheScope, catalog: listed._meta?.["pgtools.dev/catalog"] },
  server: client.getServerVersion(),
  protocolVersion: transport.protocolVersion,
  tools: tools.map((t) => ({ name: t.name, annotations: t.annotations, inputSchema: t.inputSchema, outputSchema: t.outputSchema })),
  select: await call("select_query", { table: "orders", where: "status = $1", params: ["paid"], order_by: "id" }),
  refusedWrite: await call("insert_data", { table: "orders", row: { id: 9, status: "new" } }),
  malformed: await call("select_query", { tabel: "orders" }),
};
try {
  await client.callTool({ name: "drop_everything", arguments: {} });
  report.unknownTool = { accepted: true };
} catch (err) {
  report.unknownTool = { code: err.code, message: err.message };
}
await client.close();
console.log(JSON.stringify(report));
