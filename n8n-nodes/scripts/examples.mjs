// Writes the importable example workflows in examples/n8n/ (the files users import and the
// end-to-end test runs). Each is a Manual Trigger feeding an AI Agent with an OpenAI chat model
// and the pgtools tools: every tool node (over the runner's HTTP API with the pgtools API
// credential, or through n8n's task runner with none), n8n's own MCP Client Tool on the
// runner's /mcp, or Custom Tool nodes for the operator-defined tools of
// examples/config/custom-tools.json. Edit the prompt and run. The approvals example (a chat agent
// and a review form) is approval-example.mjs's. `node examples.mjs --check` fails when the files
// differ from what this script writes (the unit tests run it).
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { approvalExample, approvalWorkflow } from './approval-example.mjs';
import { builtInTools } from './generate.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const out = join(root, 'examples', 'n8n');

/** Credential references; after import, n8n asks you to pick your own credentials if these ids do not exist. */
export const credentials = {
	pgtools: { id: 'pgtoolsApiCred01', name: 'pgtools API' },
	openai: { id: 'openAiApiCred001', name: 'OpenAI' },
	/** A Bearer Auth credential holding a pgtools token, for the MCP Client Tool. */
	bearer: { id: 'pgtoolsBearer001', name: 'pgtools token' },
};

/** mcpEndpoint is the runner's MCP address in the MCP example; change it to where yours runs. */
export const mcpEndpoint = 'http://127.0.0.1:8080/mcp';

/** endUserNode names the node that says whom the act-as example's calls are for. */
export const endUserNode = 'End user';

/**
 * actAsExpression is the act-as example's Act as User: the End user node's userId, read by node
 * name rather than $json, because a tool node's $json is the model's tool call.
 */
export const actAsExpression = `={{ $('${endUserNode}').first().json.userId }}`;

/** mcpNodeName names the MCP Client Tool node; n8n prefixes each MCP tool name with it (pgtools_select_query). */
export const mcpNodeName = 'pgtools';

// Every tool node, in the runner's canonical order: [node type name, wire name].
const tools = builtInTools().map((t) => [t.typeName, t.tool]);

const system =
	'You answer questions about a PostgreSQL database and change it when asked, using the pgtools tools. ' +
	'Call describe_schema when you do not know a table. When a tool answers success: false, read errorType and ' +
	'suggestion and correct your next call. Writes need autocommit: true, or a session from pg_tx that you commit.';

// The custom-tool example's agent knows only the two tools of examples/config/custom-tools.json.
const customSystem =
	'You help with the orders of a web shop using the pgtools tools orders_of_customer (read) and refund_order (write). ' +
	'Call refund_order with dry_run: true first to see the row it would change, then with autocommit: true. When a tool ' +
	'answers success: false, read errorType and suggestion and correct your next call.';

// Through MCP the tool names carry the MCP node's name, while the tool descriptions use the
// plain names.
const mcpSystem = `The tools come from the pgtools MCP server, so their names start with ${mcpNodeName}_ (${mcpNodeName}_select_query is select_query).`;

/**
 * examples lists every workflow: file name, id, name, prompt, parameters pinned per tool, and how
 * the agent reaches pgtools (connection of the tool nodes: http by default or taskRunner; mcp,
 * n8n's MCP Client Tool in place of the tool nodes; or custom, one Custom Tool node per name in
 * customTools in place of the tool nodes).
 */
export const examples = [
	{
		file: 'pgtools-read.json',
		id: 'pgtoolsExRead001',
		name: 'pgtools: read with Select Query',
		prompt: 'Which are the three most recent paid orders? Give their ids and totals.',
		// A builder may pin a parameter: this agent can only read the orders table.
		pinned: { select_query: { table: 'orders' } },
	},
	{
		file: 'pgtools-insert.json',
		id: 'pgtoolsExInsert1',
		name: 'pgtools: insert a row (autocommit)',
		prompt: 'Add a customer named Ada Lovelace with the e-mail ada@example.com.',
	},
	{
		file: 'pgtools-session.json',
		id: 'pgtoolsExSession',
		name: 'pgtools: a transaction across several tool calls',
		prompt:
			'In one transaction: add a customer named Grace Hopper with the e-mail grace@example.com, check that she is there, then commit.',
	},
	{
		file: 'pgtools-fix-mistake.json',
		id: 'pgtoolsExFixMist',
		name: 'pgtools: learn from an error',
		prompt: 'Show the names of two customers.',
	},
	{
		file: 'pgtools-update-intent.json',
		id: 'pgtoolsExUpdate1',
		name: 'pgtools: writes need stated intent',
		prompt: 'Set the note of order 5 to "gift wrap".',
	},
	{
		file: 'pgtools-task-runner.json',
		id: 'pgtoolsExTaskRun',
		name: 'pgtools: through the n8n task runner (no credential)',
		prompt: 'Add a customer named Alan Turing with the e-mail alan@example.com, then show me his row.',
		// Needs pgtools serve --n8n-broker beside n8n (docs/n8n.md: "n8n task runner").
		connection: 'taskRunner',
	},
	{
		file: 'pgtools-act-as-user.json',
		id: 'pgtoolsExActAs01',
		name: 'pgtools: act as the end user (row-level security)',
		prompt: 'Show my notes, then mark all of them done.',
		// Every tool node acts as the user the "End user" node names (docs/n8n.md "Multi-tenant agents");
		// with a Chat Trigger that would be its sessionId. Needs a token with act_as and a role.
		actAs: { userId: 'alice' },
	},
	{
		file: 'pgtools-mcp-client.json',
		id: 'pgtoolsExMcpCli1',
		name: 'pgtools: n8n\'s MCP Client Tool on /mcp',
		prompt: 'Show the names of the first two customers.',
		connection: 'mcp',
	},
	{
		file: 'pgtools-custom-tool.json',
		id: 'pgtoolsExCustTl1',
		name: 'pgtools: operator-defined tools (Custom Tool)',
		prompt: 'Customer 7 says their latest paid order arrived broken. Refund it with the reason "arrived broken" and tell me which order it was.',
		// Needs a runner with examples/config/custom-tools.json (examples/n8n/README.md).
		connection: 'custom',
		customTools: ['orders_of_customer', 'refund_order'],
	},
];

export function workflow(example) {
	const nodes = [
		{
			id: uuid(example.id, 1),
			name: 'When clicking ‘Execute workflow’',
			type: 'n8n-nodes-base.manualTrigger',
			typeVersion: 1,
			position: [0, 0],
			parameters: {},
		},
		{
			id: uuid(example.id, 2),
			name: 'AI Agent',
			type: '@n8n/n8n-nodes-langchain.agent',
			typeVersion: 3.1,
			position: [260, 0],
			parameters: {
				promptType: 'define',
				text: example.prompt,
				options: { systemMessage: { mcp: `${system} ${mcpSystem}`, custom: customSystem }[example.connection] ?? system },
			},
		},
		{
			id: uuid(example.id, 3),
			name: 'OpenAI Chat Model',
			type: '@n8n/n8n-nodes-langchain.lmChatOpenAi',
			typeVersion: 1.3,
			position: [100, 260],
			parameters: {
				model: { __rl: true, mode: 'list', value: 'gpt-4.1-mini' },
				// Chat Completions, which OpenAI-compatible servers speak too.
				responsesApiEnabled: false,
				options: {},
			},
			credentials: { openAiApi: credentials.openai },
		},
	];
	if (example.actAs) {
		nodes.push({
			id: uuid(example.id, 4),
			name: endUserNode,
			type: 'n8n-nodes-base.set',
			typeVersion: 3.4,
			position: [130, -160],
			parameters: {
				assignments: {
					assignments: Object.entries(example.actAs).map(([name, value], i) => ({ id: uuid(example.id, 5 + i), name, value, type: 'string' })),
				},
				options: {},
			},
		});
	}
	const connections = {
		[nodes[0].name]: { main: [[{ node: example.actAs ? endUserNode : 'AI Agent', type: 'main', index: 0 }]] },
		...(example.actAs && { [endUserNode]: { main: [[{ node: 'AI Agent', type: 'main', index: 0 }]] } }),
		'OpenAI Chat Model': { ai_languageModel: [[{ node: 'AI Agent', type: 'ai_languageModel', index: 0 }]] },
	};
	if (example.connection === 'mcp') {
		nodes.push({
			id: uuid(example.id, 10),
			name: mcpNodeName,
			type: '@n8n/n8n-nodes-langchain.mcpClientTool',
			typeVersion: 1.4,
			position: [300, 260],
			parameters: {
				endpointUrl: mcpEndpoint,
				serverTransport: 'httpStreamable',
				authentication: 'bearerAuth',
				include: 'all',
				options: {},
			},
			credentials: { httpBearerAuth: credentials.bearer },
		});
		connections[mcpNodeName] = { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] };
	} else if (example.connection === 'custom') {
		// The node is named for its tool, as the other examples' nodes are; the model sees the
		// runner's tool name whatever the node is called.
		example.customTools.forEach((name, i) => {
			nodes.push({
				id: uuid(example.id, 10 + i),
				name,
				type: 'n8n-nodes-pgtools.customTool',
				typeVersion: 1,
				position: [300 + 140 * i, 260],
				parameters: { customTool: name },
				credentials: { pgToolsApi: credentials.pgtools },
			});
			connections[name] = { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] };
		});
	} else {
		const taskRunner = example.connection === 'taskRunner';
		tools.forEach(([type, name], i) => {
			nodes.push({
				id: uuid(example.id, 10 + i),
				name,
				type: `n8n-nodes-pgtools.${type}Tool`,
				typeVersion: 1,
				position: [300 + 140 * i, 260],
				// The task runner needs no credential: pgtools serve --n8n-broker dials out to n8n.
				parameters: {
					...(taskRunner && { connection: 'taskRunner' }),
					...(example.actAs && { actAsUser: actAsExpression }),
					...(example.pinned?.[name] ?? {}),
				},
				...(!taskRunner && { credentials: { pgToolsApi: credentials.pgtools } }),
			});
			connections[name] = { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] };
		});
	}
	return {
		id: example.id,
		name: example.name,
		nodes,
		connections,
		settings: { executionOrder: 'v1' },
		pinData: {},
		active: false,
	};
}

// uuid makes stable node ids, so regenerating the files changes nothing.
function uuid(seed, n) {
	const hex = createHash('sha256').update(`${seed}/${n}`).digest('hex');
	return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
	const check = process.argv.includes('--check');
	let stale = 0;
	const all = [...examples.map((example) => [example.file, workflow(example)]), [approvalExample.file, approvalWorkflow()]];
	for (const [name, wf] of all) {
		const file = join(out, name);
		const text = `${JSON.stringify(wf, null, '\t')}\n`;
		if (!check) writeFileSync(file, text);
		else if (readFileSync(file, 'utf8') !== text) {
			console.error(`${file} is out of date: run node n8n-nodes/scripts/examples.mjs`);
			stale++;
		}
	}
	process.exit(stale ? 1 : 0);
}
