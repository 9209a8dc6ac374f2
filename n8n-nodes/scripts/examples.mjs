// Writes the importable example workflows in examples/n8n/ (the files users import and the
// end-to-end test runs). Each is a Manual Trigger feeding an AI Agent with an OpenAI chat model
// and all eight pgtools tools; edit the prompt and run. `node examples.mjs --check` fails when
// the files differ from what this script writes (the unit tests run it).
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const out = join(root, 'examples', 'n8n');

/** Credential references; after import, n8n asks you to pick your own credentials if these ids do not exist. */
export const credentials = {
	pgtools: { id: 'pgtoolsApiCred01', name: 'pgtools API' },
	openai: { id: 'openAiApiCred001', name: 'OpenAI' },
};

const tools = [
	['selectQuery', 'select_query'],
	['insertData', 'insert_data'],
	['updateData', 'update_data'],
	['deleteData', 'delete_data'],
	['executeSql', 'execute_sql'],
	['describeSchema', 'describe_schema'],
	['transactionSession', 'pg_tx'],
	['atomicTransaction', 'pg_transaction'],
];

const system =
	'You answer questions about a PostgreSQL database and change it when asked, using the pgtools tools. ' +
	'Call describe_schema when you do not know a table. When a tool answers success: false, read errorType and ' +
	'suggestion and correct your next call. Writes need autocommit: true, or a session from pg_tx that you commit.';

/** examples lists every workflow: file name, id, name, prompt, and parameters pinned per tool. */
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
			parameters: { promptType: 'define', text: example.prompt, options: { systemMessage: system } },
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
	const connections = {
		[nodes[0].name]: { main: [[{ node: 'AI Agent', type: 'main', index: 0 }]] },
		'OpenAI Chat Model': { ai_languageModel: [[{ node: 'AI Agent', type: 'ai_languageModel', index: 0 }]] },
	};
	tools.forEach(([type, name], i) => {
		nodes.push({
			id: uuid(example.id, 10 + i),
			name,
			type: `n8n-nodes-pgtools.${type}Tool`,
			typeVersion: 1,
			position: [300 + 140 * i, 260],
			parameters: { ...(example.pinned?.[name] ?? {}) },
			credentials: { pgToolsApi: credentials.pgtools },
		});
		connections[name] = { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] };
	});
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
	for (const example of examples) {
		const file = join(out, example.file);
		const text = `${JSON.stringify(workflow(example), null, '\t')}\n`;
		if (!check) writeFileSync(file, text);
		else if (readFileSync(file, 'utf8') !== text) {
			console.error(`${file} is out of date: run node n8n-nodes/scripts/examples.mjs`);
			stale++;
		}
	}
	process.exit(stale ? 1 : 0);
}
