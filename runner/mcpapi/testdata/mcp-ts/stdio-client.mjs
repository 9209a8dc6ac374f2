// The official TypeScript SDK as an MCP client on stdio, for runner/mcpapi/mcp_ts_test.go: the Go test
// runs pgtools' stdio server on this process's stdout and stdin (so the SDK's
// StdioServerTransport, which is nothing but newline-delimited JSON-RPC on stdin/stdout, serves
// as the client's transport), and this script writes what it saw to the report file.
//
// Usage: node stdio-client.mjs REPORT_FILE elicit|plain
//   elicit: declares elicitation; declines a question that names table "keep", accepts others.
//   plain:  declares no elicitation.
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [reportFile, mode] = process.argv.slice(2);
const questions = [];
const client = new Client(
  { name: "pgtools-ts-stdio-test", version: "1.0.0" },
  { capabilities: mode === "elicit" ? { elicitation: { form: {} } } : {} },
);
if (mode === "elicit") {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    questions.push(req.params.message);
    return { action: req.params.message.includes("keep") ? "decline" : "accept", content: {} };
  });
}
await client.connect(new StdioServerTransport());

// callTool validates structuredContent against the tool's outputSchema (it throws otherwise).
const call = async (name, args, options) => {
  try {
    const r = await client.callTool({ name, arguments: args }, undefined, options);
    return { isError: r.isError ?? false, structured: r.structuredContent };
  } catch (err) {
    return { thrown: String(err?.message ?? err) };
  }
};

const report = { server: client.getServerVersion(), mode };
report.dropDeclined = await call("execute_sql", { sql: "DROP TABLE keep", mode: "write", autocommit: true });
report.dropAccepted = await call("execute_sql", { sql: "DROP TABLE doomed", mode: "write", autocommit: true });
report.bigDelete = await call("delete_data", { table: "big", where: "id > $1", params: [0], autocommit: true });

let progress = 0;
report.slow = await call("execute_sql", { sql: "select pg_sleep(2.3) is null as slept" }, { onprogress: () => progress++, timeout: 20000 });
report.progress = progress;

const abort = new AbortController();
const pending = call("execute_sql", { sql: "select pg_sleep(30) as ts_cancel_me" }, { signal: abort.signal });
await new Promise((r) => setTimeout(r, 1000));
abort.abort("the user stopped it");
report.cancelled = await pending;
report.questions = questions;
writeFileSync(reportFile, JSON.stringify(report));
await client.close();
