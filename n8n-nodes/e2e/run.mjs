// make e2e: the packed n8n-nodes-pgtools in a real n8n (on Node 24), driven by a scripted
// OpenAI-compatible model, against a real runner and PostgreSQL (pgtools demo).
//
// n8n and Node 24 are installed once into a cache outside the repository (.ci/install-n8n.sh);
// which n8n is E2E_N8N_SPEC's: a directory whose package.json pins it (default
// n8n-nodes/e2e/n8n; make e2e runs each of E2E_N8N_SPECS in turn).
// Each run: pack the package as it is published (scripts/pack.mjs) and install the tarball into a fresh n8n user folder the way
// n8n's community-package installer does, import the credentials and the workflows of
// examples/n8n/, run each workflow with `n8n execute`, and check what happened in PostgreSQL
// and what the model was sent (the tool schemas with the schema descriptions, the tool results
// with errorType and suggestion). The task-runner workflow runs against `pgtools serve
// --n8n-broker` joined to each n8n's task broker; the MCP workflow uses n8n's own MCP Client
// Tool on the runner's /mcp; the Custom Tool workflow runs against `pgtools serve --config
// examples/config/custom-tools.json` on the demo's database. Everything listens on 127.0.0.1.
// Environment: E2E_N8N_SPEC (above), PGTOOLS_E2E_CACHE (default ~/.cache/pgtools-e2e), PGTOOLS_E2E_KEEP=1 keeps the
// user folder, PGTOOLS_BIN uses a prebuilt runner.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { credentials as exampleCredentials, examples, mcpNodeName } from '../scripts/examples.mjs';
import { approvalSpec, startApprovals } from './approvals.mjs';
import { pack } from '../scripts/pack.mjs';
import { hiddenInNodes, pkg, root, schemaOf, toolNames } from '../test/helpers.mjs';
import { actAsTokens, buildRunner, call, startActAsRunner, startDemo, startServe } from '../test/runner.mjs';
import { startFakeLLM, toolResults, toolTexts } from './fake-llm.mjs';

const spec = process.env.E2E_N8N_SPEC || 'n8n-nodes/e2e/n8n';
const n8nVersion = JSON.parse(readFileSync(join(root, spec, 'package.json'), 'utf8')).dependencies.n8n;
const started = Date.now();
const log = (msg) => console.log(`e2e [${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);

const wireNames = toolNames;
const example = Object.fromEntries(examples.map((e) => [e.file.replace(/^pgtools-|\.json$/g, ''), e]));
// Variants of the read example built here: the same agent with a credential whose runner is
// down, and with a second Select Query node pinned to another table.
const variants = {
	down: { ...example.read, id: 'pgtoolsExDown001' },
	twoSelects: { ...example.read, id: 'pgtoolsExTwoSel1', pinned: { ...example.read.pinned, select_customers: { table: 'customers' } } },
};

let n8n; // { node, bin, env }
const customCredential = { id: 'pgtoolsApiCustEx', name: 'pgtools API (custom tools example)' };
let bin;
let runner;
let customRunner; // pgtools serve with examples/config/custom-tools.json, for the Custom Tool example
let approvals; // pgtools serve with require_approval, its credentials and workflows (approvals.mjs)
let proxy;
let llm;
let work;

before(async () => {
	log('installing or reusing n8n and Node 24 (first run: 3 to 6 minutes)...');
	const [nodeDir, n8nDir] = execFileSync('bash', [join(root, '.ci', 'install-n8n.sh'), spec], {
		encoding: 'utf8',
		stdio: ['ignore', 'pipe', 'inherit'],
	})
		.trim()
		.split(' ');
	work = mkdtempSync(join(tmpdir(), 'pgtools-e2e-'));
	const userFolder = join(work, 'user');

	log('packing n8n-nodes-pgtools and installing it as a community package...');
	const packed = pack(work);
	const files = packed.files.map((f) => f.path);
	const shipped = (f) => pkg.files.some((p) => f === p || f.startsWith(`${p}/`)) || ['package.json', 'README.md', 'LICENSE'].includes(f);
	const stray = files.filter((f) => !shipped(f));
	assert.deepEqual(stray, [], 'the tarball holds only what n8n needs');
	for (const f of [...pkg.n8n.nodes, ...pkg.n8n.credentials]) assert.ok(files.includes(f), `${f} is packed`);
	installLikeN8n(join(work, packed.filename), join(userFolder, '.n8n', 'nodes'));

	log('building the runner and starting pgtools demo (throwaway PostgreSQL)...');
	bin = buildRunner();
	runner = await startDemo(bin);
	// examples/n8n/README.md's command: the example config, its database and token from the
	// environment (DATABASE_URL replaces the file's url), the demo's token reused.
	customRunner = {
		...(await startServe(bin, ['--config', join(root, 'examples', 'config', 'custom-tools.json')], {
			env: { DATABASE_URL: runner.databaseUrl, PGTOOLS_TOKENS: `${runner.token}:read,write`, PGTOOLS_LOG_LEVEL: 'info' },
		})),
		token: runner.token,
	};
	approvals = await startApprovals(bin, runner);
	proxy = await startRecordingProxy(runner.url);
	llm = await startFakeLLM();

	n8n = {
		dir: n8nDir,
		node: join(nodeDir, 'bin', 'node'),
		bin: join(n8nDir, 'node_modules', 'n8n', 'bin', 'n8n'),
		env: {
			...process.env,
			PATH: `${join(nodeDir, 'bin')}:${process.env.PATH}`,
			N8N_USER_FOLDER: userFolder,
			N8N_ENCRYPTION_KEY: 'pgtools-e2e-only-not-a-secret',
			N8N_RUNNERS_AUTH_TOKEN: randomBytes(16).toString('hex'),
			N8N_LISTEN_ADDRESS: '127.0.0.1',
			N8N_RUNNERS_BROKER_LISTEN_ADDRESS: '127.0.0.1',
			N8N_DIAGNOSTICS_ENABLED: 'false',
			N8N_VERSION_NOTIFICATIONS_ENABLED: 'false',
			N8N_TEMPLATES_ENABLED: 'false',
			N8N_PERSONALIZATION_ENABLED: 'false',
			N8N_DISABLED_MODULES: 'mcp-registry',
			N8N_VERIFIED_PACKAGES_ENABLED: 'false',
			N8N_REINSTALL_MISSING_PACKAGES: 'false',
		},
	};
	log(`n8n ${(await n8nRun(['--version'])).stdout.trim()}; importing credentials and ${examples.length} workflows...`);
	writeFileSync(
		join(work, 'credentials.json'),
		JSON.stringify([
			// n8n reaches the runner through a recording proxy, to check the headers the nodes send.
			{ id: 'pgtoolsApiCred01', name: 'pgtools API', type: 'pgToolsApi', data: { url: proxy.url, token: runner.token } },
			{ id: 'openAiApiCred001', name: 'OpenAI', type: 'openAiApi', data: { apiKey: 'sk-e2e', url: llm.url } },
			{ ...exampleCredentials.bearer, type: 'httpBearerAuth', data: { token: runner.token } },
			// A runner address nothing listens on.
			{ id: 'pgtoolsApiDown01', name: 'pgtools API (down)', type: 'pgToolsApi', data: { url: `http://127.0.0.1:${await freePort()}`, token: runner.token } },
			{ ...customCredential, type: 'pgToolsApi', data: { url: customRunner.url, token: customRunner.token } },
			...(approvals?.credentials ?? []),
		]),
	);
	const workflows = examples.map((e) => JSON.parse(readFileSync(join(root, 'examples', 'n8n', e.file), 'utf8')));
	const read = workflows[examples.indexOf(example.read)];
	const down = { ...structuredClone(read), id: variants.down.id, name: 'pgtools e2e: runner down' };
	for (const node of down.nodes) if (node.credentials?.pgToolsApi) node.credentials.pgToolsApi = { id: 'pgtoolsApiDown01', name: 'pgtools API (down)' };
	const two = { ...structuredClone(read), id: variants.twoSelects.id, name: 'pgtools e2e: two Select Query nodes' };
	const first = two.nodes.find((n) => n.name === 'select_query');
	two.nodes.push({ ...structuredClone(first), id: '5b0e6a1c-2f7d-4c1e-9a51-7d4f3f0e2b11', name: 'select_customers', position: [300, 420], parameters: { table: 'customers' } });
	two.connections.select_customers = structuredClone(two.connections.select_query);
	workflows.push(down, two, ...(approvals?.workflows ?? []));
	// The Custom Tool example's credential: the runner with its custom tools.
	for (const node of workflows[examples.indexOf(example['custom-tool'])].nodes) if (node.credentials?.pgToolsApi) node.credentials.pgToolsApi = customCredential;
	// The MCP Client Tool's endpoint is a node parameter, not a credential: point it at this runner.
	for (const node of workflows.flatMap((w) => w.nodes)) {
		if (node.type === '@n8n/n8n-nodes-langchain.mcpClientTool') node.parameters.endpointUrl = `${proxy.url}/mcp`;
	}
	writeFileSync(join(work, 'workflows.json'), JSON.stringify(workflows));
	await n8nRun(['import:credentials', `--input=${join(work, 'credentials.json')}`]);
	await n8nRun(['import:workflow', `--input=${join(work, 'workflows.json')}`]);
	log('ready');
});

after(async () => {
	await proxy?.close();
	await customRunner?.stop();
	await runner?.stop();
	await llm?.close();
	if (work && !process.env.PGTOOLS_E2E_KEEP) rmSync(work, { recursive: true, force: true });
	else if (work) log(`kept ${work}`);
	log('done');
});

// installLikeN8n does what n8n's community-package installer does (CommunityPackagesService
// .downloadPackage): unpack into nodes/node_modules/<name>, drop dev, peer and optional
// dependencies, npm install there, and record the package in nodes/package.json.
function installLikeN8n(tarball, nodesDir) {
	const dir = join(nodesDir, 'node_modules', pkg.name);
	mkdirSync(dir, { recursive: true });
	execFileSync('tar', ['-xzf', tarball, '-C', dir, '--strip-components=1']);
	const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
	delete manifest.devDependencies;
	delete manifest.peerDependencies;
	delete manifest.optionalDependencies;
	writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
	execFileSync(
		'npm',
		['install', '--audit=false', '--fund=false', '--bin-links=false', '--install-strategy=shallow', '--ignore-scripts=true', '--package-lock=false', '--loglevel=error'],
		{ cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] },
	);
	writeFileSync(join(nodesDir, 'package.json'), JSON.stringify({ name: 'installed-nodes', private: true, dependencies: { [pkg.name]: manifest.version } }, null, 2));
}

// startRecordingProxy forwards HTTP requests to target and records each request's method,
// path and headers.
async function startRecordingProxy(target) {
	const seen = [];
	const server = createHttpServer((req, res) => {
		seen.push({ method: req.method, path: req.url, headers: req.headers });
		const upstream = httpRequest(`${target}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
			res.writeHead(answer.statusCode, answer.headers);
			answer.pipe(res);
		});
		upstream.on('error', (error) => {
			res.writeHead(502);
			res.end(String(error));
		});
		req.pipe(upstream);
	});
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	return {
		url: `http://127.0.0.1:${server.address().port}`,
		seen,
		take: () => seen.splice(0),
		close: () => new Promise((resolve) => server.close(resolve)),
	};
}

async function freePort() {
	const server = createServer();
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	const { port } = server.address();
	await new Promise((resolve) => server.close(resolve));
	return port;
}

// n8nRun runs one n8n CLI command, each with its own task-broker port.
// n8nStart runs `n8n start` with an owner set up from the environment, waits until it
// answers, logs in, and returns a REST client, its base URL and a stop().
async function n8nStart() {
	const password = `e2e-${randomBytes(8).toString('hex')}`;
	const bcrypt = createRequire(join(n8n.dir, 'package.json'))('bcryptjs');
	const port = await freePort();
	const env = {
		...n8n.env,
		N8N_PORT: String(port),
		N8N_RUNNERS_BROKER_PORT: String(await freePort()),
		N8N_SECURE_COOKIE: 'false',
		N8N_LOG_LEVEL: 'warn',
		N8N_INSTANCE_OWNER_MANAGED_BY_ENV: 'true',
		N8N_INSTANCE_OWNER_EMAIL: 'owner@example.com',
		N8N_INSTANCE_OWNER_PASSWORD_HASH: bcrypt.hashSync(password, 10),
	};
	const child = spawn(n8n.node, [n8n.bin, 'start'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
	let output = '';
	child.stdout.on('data', (c) => (output += c));
	child.stderr.on('data', (c) => (output += c));
	const exited = new Promise((resolve) => child.on('exit', resolve));
	const base = `http://127.0.0.1:${port}`;
	const stop = async () => {
		if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
		await exited;
	};
	try {
		const deadline = Date.now() + 120_000;
		for (;;) {
			const ok = await fetch(`${base}/healthz/readiness`).then((r) => r.ok, () => false);
			if (ok) break;
			if (Date.now() > deadline || child.exitCode !== null) throw new Error(`n8n start did not come up:\n${output}`);
			await new Promise((resolve) => setTimeout(resolve, 500));
		}
		const login = await fetch(`${base}/rest/login`, {
			method: 'POST',
			headers: { 'content-type': 'application/json' },
			body: JSON.stringify({ emailOrLdapLoginId: 'owner@example.com', password }),
		});
		assert.equal(login.status, 200, `login: ${await login.clone().text()}`);
		const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
		const post = async (path, body) => {
			const r = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', cookie }, body: JSON.stringify(body) });
			return await r.json();
		};
		return { post, base, stop };
	} catch (error) {
		await stop();
		throw error;
	}
}

async function n8nRun(args, { timeoutMs = 240_000, logLevel = 'warn', env: extra = {} } = {}) {
	const env = {
		...n8n.env,
		N8N_LOG_LEVEL: logLevel,
		N8N_RUNNERS_BROKER_PORT: String(await freePort()),
		N8N_PORT: String(await freePort()),
		...extra,
	};
	const child = spawn(n8n.node, [n8n.bin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
	let stdout = '';
	let stderr = '';
	child.stdout.on('data', (c) => (stdout += c));
	child.stderr.on('data', (c) => (stderr += c));
	const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
	const code = await new Promise((resolve) => child.on('exit', (c, s) => resolve(c ?? s)));
	clearTimeout(timer);
	if (code !== 0) throw new Error(`n8n ${args.join(' ')} exited ${code}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`);
	return { stdout, stderr };
}

let runs = 0;

// execute runs a workflow with the given model script and returns the agent's answer, what the
// model was sent, and the runner calls the proxy saw (calls: the HTTP API's; seen: all). env
// adds to n8n's environment.
async function execute(workflow, script, { env } = {}) {
	const workflowId = workflow.id;
	llm.use(script);
	proxy.take();
	const t = Date.now();
	// The run data is logged at level info.
	const { stdout } = await n8nRun(['execute', `--id=${workflowId}`, '--rawOutput'], { logLevel: 'info', env });
	log(`  n8n execute --id=${workflowId}: ${((Date.now() - t) / 1000).toFixed(1)}s, ${llm.state.requests.length} model calls`);
	assert.deepEqual(llm.state.errors, [], 'the fake model had no trouble');
	const { output, run } = agentOutput(stdout);
	const requests = llm.state.requests;
	const prompt = requests[0].messages.find((m) => m.role === 'user');
	assert.equal(prompt?.content, workflow.prompt, 'the model got the workflow\'s prompt');
	const seen = proxy.take();
	const calls = seen.filter((r) => r.path.startsWith('/v1/tools/'));
	writeFileSync(join(work, `${workflowId}-${++runs}.json`), JSON.stringify({ output, requests, seen }, null, 2));
	for (const c of seen) assert.equal(c.headers.authorization, `Bearer ${runner.token}`, 'the credential authenticates every call');
	const messages = requests.at(-1).messages;
	return { output, run, requests, calls, seen, results: toolResults(messages), texts: toolTexts(messages) };
}

// printedRun is the run `n8n execute --rawOutput` prints.
function printedRun(stdout) {
	const lines = stdout.split('\n');
	const start = lines.indexOf('{');
	const end = lines.lastIndexOf('}');
	assert.ok(start >= 0 && end > start, `n8n printed run data:\n${stdout}`);
	return JSON.parse(lines.slice(start, end + 1).join('\n'));
}

// runData runs a workflow without an agent and returns its run data by node name.
async function runData(workflowId) {
	const t = Date.now();
	const { stdout } = await n8nRun(['execute', `--id=${workflowId}`, '--rawOutput'], { logLevel: 'info' });
	log(`  n8n execute --id=${workflowId}: ${((Date.now() - t) / 1000).toFixed(1)}s`);
	return printedRun(stdout).data.resultData.runData;
}

// agentOutput finds the AI Agent's answer in the run data `n8n execute --rawOutput` prints.
function agentOutput(stdout) {
	const run = printedRun(stdout);
	const agent = run.data?.resultData?.runData?.['AI Agent'];
	assert.ok(agent, `the AI Agent ran:\n${stdout.slice(0, 2000)}`);
	assert.equal(agent[0].error, undefined, `the AI Agent did not fail: ${JSON.stringify(agent[0].error)}`);
	return { output: agent[0].data.main[0][0].json.output, run: run.data.resultData.runData };
}

// turn counts the tool answers so far: the script's position in the conversation.
const turn = (messages) => messages.filter((m) => m.role === 'tool').length;
const lastResult = (messages) => toolResults(messages).at(-1);
const toolCall = (name, args) => ({ toolCalls: [{ name, arguments: args }] });

// checkToolSchemas: the model was offered the eight tools, each with the schema's description
// (then the values the workflow pinned) and arguments (less those pinned), in the schema's words
// followed by what n8n's tool schema cannot say: the JSON shape (n8n's json type reaches the
// model with no "type"), the allowed values of an enum.
function checkToolSchemas(request, pinned = {}) {
	const offered = Object.fromEntries(request.tools.map((t) => [t.function.name, t.function]));
	assert.deepEqual(Object.keys(offered).sort(), [...wireNames, ...Object.keys(pinned).filter((n) => !wireNames.includes(n))].sort());
	for (const name of wireNames) {
		const schema = schemaOf(name);
		const fn = offered[name];
		const hidden = [...hiddenInNodes(name), ...Object.keys(pinned[name] ?? {})];
		const fixed = Object.entries(pinned[name] ?? {}).map(([k, v]) => `${k} ${JSON.stringify(v)}`);
		assert.equal(fn.description, `${schema.description}${fixed.length ? ` Fixed for this tool: ${fixed.join(', ')}.` : ''}`, `${name}: tool description`);
		const keys = Object.keys(schema.properties).filter((k) => !hidden.includes(k));
		assert.deepEqual(Object.keys(fn.parameters.properties).sort(), [...keys].sort(), `${name}: arguments`);
		for (const key of keys) {
			const prop = schema.properties[key];
			const got = fn.parameters.properties[key];
			assert.ok(got.description.startsWith(prop.description), `${name}.${key}: description`);
			if (prop.enum) assert.ok(got.description.endsWith(` One of: ${prop.enum.map((o) => JSON.stringify(o)).join(', ')}.`), `${name}.${key}: enum named`);
			if (prop.type === 'object' || prop.type === 'array' || key === 'params') {
				assert.equal(got.type, undefined, `${name}.${key}: n8n's json type`);
				assert.match(got.description, / Type: a JSON (object|array)/, `${name}.${key}: shape named`);
			}
		}
		const required = (schema.required ?? []).filter((k) => !hidden.includes(k));
		assert.deepEqual([...(fn.parameters.required ?? [])].sort(), [...required].sort(), `${name}: required arguments`);
	}
}

// rawCall posts a tool call straight to the runner and returns the answer's text, unparsed.
async function rawCall(tool, body) {
	const r = await fetch(`${runner.url}/v1/tools/${tool}`, {
		method: 'POST',
		headers: { authorization: `Bearer ${runner.token}`, 'content-type': 'application/json' },
		body,
	});
	return await r.text();
}

async function customers(email) {
	const r = await call(runner, 'select_query', { table: 'customers', columns: 'id,name,email', where: 'email = $1', params: [email] });
	assert.equal(r.success, true, JSON.stringify(r));
	return r.data;
}

describe(`n8n-nodes-pgtools in n8n ${n8nVersion}`, () => {
	test('reads with Select Query and answers with the rows', async () => {
		const { output, requests, results } = await execute(example.read, (messages) => {
			if (turn(messages) === 0) {
				// table is pinned to orders by the workflow: the model does not pass it.
				return toolCall('select_query', { columns: 'id,total', where: 'status = $1', params: '["paid"]', order_by: 'placed_at desc, id desc', limit: 3 });
			}
			const r = lastResult(messages);
			return { content: `The three most recent paid orders: ${r.data.map((o) => `#${o.id} (${o.total} EUR)`).join(', ')}.` };
		});
		checkToolSchemas(requests[0], example.read.pinned);
		assert.equal(results[0].success, true, JSON.stringify(results[0]));
		assert.equal(results[0].table, 'orders', 'the pinned table was used');
		const truth = await call(runner, 'select_query', { table: 'orders', columns: 'id,total', where: "status = 'paid'", order_by: 'placed_at desc, id desc', limit: 3 });
		assert.equal(output, `The three most recent paid orders: ${truth.data.map((o) => `#${o.id} (${o.total} EUR)`).join(', ')}.`);
	});

	test('inserts with autocommit: the row is in the table afterwards', async () => {
		assert.equal((await customers('ada@example.com')).length, 0);
		const { output, requests, results } = await execute(example.insert, (messages) =>
			turn(messages) === 0
				? toolCall('insert_data', { table: 'customers', row: '{"name": "Ada Lovelace", "email": "ada@example.com"}', autocommit: true })
				: { content: `Added customer #${lastResult(messages).data[0].id}.` },
		);
		checkToolSchemas(requests[0]);
		assert.equal(results[0].success, true, JSON.stringify(results[0]));
		const rows = await customers('ada@example.com');
		assert.equal(rows.length, 1);
		assert.equal(rows[0].name, 'Ada Lovelace');
		assert.equal(output, `Added customer #${rows[0].id}.`);
	});

	// The same workflow twice: the model commits once and rolls back once.
	for (const end of ['commit', 'rollback']) {
		test(`opens a session, inserts, reads inside it, and ${end}s`, async () => {
			const email = end === 'commit' ? 'grace@example.com' : 'grace.rollback@example.com';
			let session;
			const { output, requests, results, calls } = await execute(example.session, (messages) => {
				switch (turn(messages)) {
					case 0:
						return toolCall('pg_tx', { action: 'begin' });
					case 1:
						session = lastResult(messages).session_id;
						return toolCall('insert_data', { table: 'customers', row: JSON.stringify({ name: 'Grace Hopper', email }), session_id: session });
					case 2:
						return toolCall('select_query', { table: 'customers', where: 'email = $1', params: JSON.stringify([email]), session_id: session });
					case 3:
						return toolCall('pg_tx', { action: end, session_id: session });
					default:
						return { content: end === 'commit' ? 'Grace Hopper is added.' : 'I rolled the change back.' };
				}
			});
			checkToolSchemas(requests[0]);
			const [begin, insert, inside, done] = results;
			assert.equal(begin.success, true, JSON.stringify(begin));
			assert.match(begin.session_id, /^[0-9a-f-]{36}$/);
			assert.equal(insert.success, true, JSON.stringify(insert));
			assert.equal(inside.rowCount, 1, 'the session sees its own insert');
			assert.equal(done.success, true, JSON.stringify(done));
			assert.equal((await customers(email)).length, end === 'commit' ? 1 : 0, `after ${end}`);
			// Every call in the session names it in X-PgTools-Session too (for session-aware routing).
			assert.deepEqual(
				calls.map((c) => [c.path, c.headers['x-pgtools-session']]),
				[
					['/v1/tools/pg_tx', undefined],
					['/v1/tools/insert_data', session],
					['/v1/tools/select_query', session],
					['/v1/tools/pg_tx', session],
				],
			);
			assert.ok(output.length > 0);
		});
	}

	test('makes a mistake, reads the suggestion, and succeeds on the second call', async () => {
		const { output, results, run } = await execute(example['fix-mistake'], (messages) => {
			switch (turn(messages)) {
				case 0:
					return toolCall('select_query', { table: 'customers', columns: 'id,nmae', order_by: 'id', limit: 2 });
				case 1: {
					// What a model does with the answer: take the column the suggestion names.
					const fixed = /Did you mean "([^"]+)"/.exec(lastResult(messages).suggestion)[1];
					return toolCall('select_query', { table: 'customers', columns: `id,${fixed}`, order_by: 'id', limit: 2 });
				}
				default:
					return { content: `Two customers: ${lastResult(messages).data.map((c) => c.name).join(' and ')}.` };
			}
		});
		const [mistake, fixed] = results;
		assert.equal(mistake.success, false);
		assert.equal(mistake.errorType, 'invalid_column');
		assert.match(mistake.suggestion, /Did you mean "name"\?/);
		assert.equal(fixed.success, true, JSON.stringify(fixed));
		// The error answer failed its tool run, as n8n's own tool nodes do (red in the editor); the
		// model still got the whole error object (the run's message); the corrected call succeeded.
		const [failedRun, okRun] = run.select_query;
		assert.equal(failedRun.executionStatus, 'error');
		assert.equal(JSON.parse(failedRun.error.message).errorType, 'invalid_column');
		assert.match(failedRun.error.description, /^invalid_column: Did you mean "name"\?/);
		assert.equal(okRun.executionStatus, 'success');
		assert.equal(okRun.error, undefined);
		const truth = await call(runner, 'select_query', { table: 'customers', columns: 'name', order_by: 'id', limit: 2 });
		assert.equal(output, `Two customers: ${truth.data.map((c) => c.name).join(' and ')}.`);
	});

	test('calls Update Data without intent and gets write_intent_required as the tool result', async () => {
		const { output, results } = await execute(example['update-intent'], (messages) =>
			turn(messages) === 0
				? toolCall('update_data', { table: 'orders', set: { note: 'gift wrap' }, where: 'id = $1', params: '[5]' })
				: { content: `Not done: ${lastResult(messages).errorType}.` },
		);
		assert.equal(results[0].success, false);
		assert.equal(results[0].errorType, 'write_intent_required');
		assert.match(results[0].suggestion, /autocommit/);
		assert.equal(output, 'Not done: write_intent_required.');
		const order = await call(runner, 'select_query', { table: 'orders', columns: 'note', where: 'id = 5' });
		assert.notEqual(order.data[0].note, 'gift wrap', 'nothing was written');
	});

	test('numbers past 2^53, big integers in jsonb and 30-digit numerics go through exactly, both ways', async () => {
		const kind = 'e2e-big';
		// JavaScript reads both n as 9007199254740992: only exact forwarding keeps the rows apart.
		const rows = `[{"kind": "${kind}", "payload": {"n": 9007199254740992}}, {"kind": "${kind}", "payload": {"n": 9007199254740993, "big": 12345678901234567890, "neg": -9007199254740995, "num": 123456789012345678901234567890.5}}]`;
		const { results, texts, run } = await execute(example.insert, (messages) => {
			switch (turn(messages)) {
				case 0:
					return toolCall('insert_data', { table: 'events', rows, returning: 'id', autocommit: true });
				case 1:
					return toolCall('select_query', { table: 'events', columns: 'payload', where: "kind = $1 and (payload->>'n')::numeric = $2", params: `["${kind}", 9007199254740993]` });
				case 2:
					// A model that writes the number bare in an object: n8n parses the arguments with
					// JavaScript before the node sees them, so the node refuses rather than write …996.
					return { toolCalls: [{ name: 'insert_data', rawArguments: `{"table": "events", "row": {"kind": "${kind}-bare", "payload": {"n": 9007199254740995}}, "autocommit": true}` }] };
				default:
					return { content: 'done' };
			}
		});
		const [inserted, read, bare] = results;
		assert.equal(inserted.success, true, JSON.stringify(inserted));
		assert.equal(read.rowCount, 1, `params selected the row with …993, not its neighbour: ${texts[1]}`);
		// What the model read: numbers JavaScript cannot hold, as strings of their exact digits.
		assert.deepEqual(read.data[0].payload, { n: '9007199254740993', big: '12345678901234567890', neg: '-9007199254740995', num: '123456789012345678901234567890.5' });
		assert.equal(bare.errorType, 'invalid_arguments');
		assert.match(bare.error, /row\.payload\.n: a number JavaScript cannot hold exactly/);
		assert.equal(run.insert_data[1].executionStatus, 'error');
		// What PostgreSQL holds, read apart from n8n as text.
		const raw = await rawCall('select_query', `{"table": "events", "columns": "kind,payload", "where": "kind like $1", "params": ["${kind}%"], "order_by": "id"}`);
		assert.match(raw, /"n":\s*9007199254740992\}.*"n":\s*9007199254740993/s);
		assert.match(raw, /"big":\s*12345678901234567890/);
		assert.match(raw, /"num":\s*123456789012345678901234567890\.5/);
		assert.doesNotMatch(raw, /-bare/, 'the refused row was not written');
	});

	test('with the runner down, the model reads the fix in the tool result', async () => {
		const { output, results, run } = await execute(variants.down, (messages) =>
			turn(messages) === 0 ? toolCall('select_query', { limit: 1 }) : { content: lastResult(messages).error },
		);
		assert.match(
			results[0].error,
			/^Cannot reach the pgtools runner at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)\. Check that pgtools serve is running and that the URL in the pgtools API credential is its address, e\.g\. http:\/\/127\.0\.0\.1:8080\.$/,
		);
		assert.equal(output, results[0].error);
		assert.equal(run.select_query[0].executionStatus, 'error', 'the tool run failed');
	});

	test('two Select Query nodes pinned to different tables are told apart by name and description', async () => {
		const { requests, results } = await execute(variants.twoSelects, (messages) =>
			turn(messages) === 0 ? toolCall('select_customers', { columns: 'id', limit: 1 }) : { content: 'ok' },
		);
		checkToolSchemas(requests[0], variants.twoSelects.pinned);
		const offered = Object.fromEntries(requests[0].tools.map((t) => [t.function.name, t.function]));
		assert.ok(offered.select_query.description.endsWith(' Fixed for this tool: table "orders".'));
		assert.equal(offered.select_customers.description, `${schemaOf('select_query').description} Fixed for this tool: table "customers".`);
		assert.equal(results[0].table, 'customers');
	});

	test('a default read of the widest demo table fits the response size limit', async () => {
		// The widest table: the most bytes in a default read (1000 rows), straight from the runner.
		const listed = await call(runner, 'describe_schema', {});
		const sizes = [];
		for (const t of listed.data ?? listed.tables) {
			const name = t.table ?? t.name;
			sizes.push([name, (await rawCall('select_query', JSON.stringify({ table: name }))).length]);
		}
		const [widest, before] = sizes.sort((a, b) => b[1] - a[1])[0];
		const { results, texts } = await execute(example.insert, (messages) =>
			turn(messages) === 0 ? toolCall('select_query', { table: widest }) : { content: 'ok' },
		);
		const after = texts[0].length;
		log(`  default read of ${widest}: ${before} bytes (~${Math.round(before / 4)} tokens) from the runner; ${after} bytes (~${Math.round(after / 4)} tokens) through the node`);
		assert.equal(results[0].truncated, true);
		assert.match(results[0].hint, /16384-byte response cap/);
		assert.ok(after < 16384 + 2048, `${after} bytes reached the model`);
		assert.ok(before > after);
	});

	test('the credential test in the editor says what is wrong', async () => {
		const t = Date.now();
		const server = await n8nStart();
		try {
			const check = async (data) => {
				const r = await server.post('/rest/credentials/test', {
					credentials: { id: 'pgtoolsApiCred01', name: 'pgtools API', type: 'pgToolsApi', data },
				});
				assert.ok(r.data, JSON.stringify(r));
				return `${r.data.status}: ${r.data.message}`;
			};
			// Declarative (n8n's verification scanner refuses the request helper a test function
			// needs): n8n's own words for success and for an unreachable address, the rules' for the rest.
			assert.equal(await check({ url: runner.url, token: runner.token }), 'OK: Connection successful!');
			assert.equal(await check({ url: `${runner.url}/`, token: runner.token }), 'OK: Connection successful!');
			assert.equal(
				await check({ url: runner.url, token: 'not-the-token-0123456789' }),
				'Error: The pgtools runner refused this token. Copy a token the runner was started with (pgtools serve --token or PGTOOLS_TOKENS).',
			);
			assert.equal(
				await check({ url: `${runner.url}/v1`, token: runner.token }),
				"Error: No pgtools runner answers at this URL (HTTP 404). Use the runner's base address without /v1, e.g. http://127.0.0.1:8080.",
			);
			const closed = `http://127.0.0.1:${await freePort()}`;
			assert.equal(await check({ url: closed, token: 'x' }), 'Error: ECONNREFUSED');
		} finally {
			await server.stop();
		}
		log(`  n8n start and five credential tests: ${((Date.now() - t) / 1000).toFixed(1)}s`);
	});
});

// The task runner: pgtools serve --n8n-broker beside n8n, joined to the task broker of each
// `n8n execute` on one fixed port. Every n8n execute is a new n8n process with a new broker, so
// each run after the first is an n8n restart the runner must notice and recover from by itself.
describe('through the n8n task runner (pgtools serve --n8n-broker)', () => {
	const workflow = example['task-runner'];
	let brokerPort;
	let broker; // the pgtools serve joined to the broker
	const registrations = () => broker.logs.filter((l) => l.message === 'registered with the n8n task broker').length;
	const tasks = () => broker.logs.filter((l) => l.message === 'tool call' && l.transport === 'n8n').map((l) => [l.tool, l.principal, l.error_type ?? 'ok']);
	const alan = { name: 'Alan Turing', email: 'alan@example.com' };

	before(async () => {
		brokerPort = await freePort();
		// Started here rather than with the demo, so its reconnect backoff is short when these
		// runs begin. A runner of its own: the demo's serves HTTP only.
		broker = await startServe(bin, ['--database-url', runner.databaseUrl, '--n8n-broker', `http://127.0.0.1:${brokerPort}`], {
			env: { N8N_RUNNERS_AUTH_TOKEN: n8n.env.N8N_RUNNERS_AUTH_TOKEN, PGTOOLS_LOG_LEVEL: 'info' },
		});
	});
	after(async () => await broker?.stop());

	const run = (script) => execute(workflow, script, { env: { N8N_RUNNERS_BROKER_PORT: String(brokerPort) } });

	test('an agent whose tools have no credential writes with autocommit and reads', async () => {
		assert.equal((await customers(alan.email)).length, 0);
		const { output, requests, results, seen } = await run((messages) => {
			switch (turn(messages)) {
				case 0:
					return toolCall('insert_data', { table: 'customers', row: JSON.stringify(alan), autocommit: true });
				case 1:
					return toolCall('select_query', { table: 'customers', columns: 'id,name,email', where: 'email = $1', params: JSON.stringify([alan.email]) });
				default:
					return { content: `Added: ${JSON.stringify(lastResult(messages).data)}` };
			}
		});
		checkToolSchemas(requests[0]);
		const [inserted, read] = results;
		assert.equal(inserted.success, true, JSON.stringify(inserted));
		assert.equal(read.success, true, JSON.stringify(read));
		const rows = await customers(alan.email);
		assert.equal(rows.length, 1, 'the row is in PostgreSQL');
		assert.deepEqual(read.data, rows, 'the model read it through the task runner');
		assert.equal(inserted.data[0].id, rows[0].id);
		assert.equal(output, `Added: ${JSON.stringify(rows)}`);
		assert.deepEqual(seen, [], 'nothing went over the HTTP API');
		assert.deepEqual(tasks(), [
			['insert_data', 'n8n-broker', 'ok'],
			['select_query', 'n8n-broker', 'ok'],
		]);
	});

	test('n8n restarted: the runner reconnects by itself, and an error answer is the tool result', async () => {
		const before = registrations();
		const { output, results } = await run((messages) => {
			switch (turn(messages)) {
				case 0:
					// The same customer again: the e-mail is unique.
					return toolCall('insert_data', { table: 'customers', row: JSON.stringify(alan), autocommit: true });
				case 1:
					return toolCall('select_query', { table: 'customers', columns: 'id,name', where: 'email = $1', params: JSON.stringify([alan.email]) });
				default:
					return { content: `${toolResults(messages)[0].errorType}; still ${lastResult(messages).rowCount} row.` };
			}
		});
		assert.ok(broker.running(), 'the same runner process');
		assert.ok(registrations() > before, `registered with the new n8n's broker (${before} → ${registrations()})`);
		const [refused, read] = results;
		// The runner's error object, as the HTTP API answers it, reached the model whole.
		assert.equal(refused.success, false);
		assert.equal(refused.errorType, 'constraint_violation', JSON.stringify(refused));
		assert.equal(refused.sqlState, '23505');
		assert.ok(refused.suggestion);
		assert.equal(read.success, true, JSON.stringify(read));
		assert.equal(output, 'constraint_violation; still 1 row.');
		assert.deepEqual(tasks().slice(-2), [
			['insert_data', 'n8n-broker', 'constraint_violation'],
			['select_query', 'n8n-broker', 'ok'],
		]);
	});

	test('big numbers go through the task runner exactly, both ways', async () => {
		const kind = 'e2e-big-task';
		const { results, texts } = await run((messages) => {
			switch (turn(messages)) {
				case 0:
					return toolCall('insert_data', { table: 'events', row: `{"kind": "${kind}", "payload": {"n": 9007199254740993, "big": 12345678901234567890}}`, autocommit: true });
				case 1:
					return toolCall('select_query', { table: 'events', columns: 'payload', where: "kind = $1 and (payload->>'n')::numeric = $2", params: `["${kind}", 9007199254740993]` });
				default:
					return { content: 'done' };
			}
		});
		assert.equal(results[0].success, true, JSON.stringify(results[0]));
		assert.equal(results[1].rowCount, 1, texts[1]);
		assert.deepEqual(results[1].data[0].payload, { n: '9007199254740993', big: '12345678901234567890' });
		const raw = await rawCall('select_query', `{"table": "events", "columns": "payload", "where": "kind = $1", "params": ["${kind}"]}`);
		assert.match(raw, /"n":\s*9007199254740993/);
		assert.match(raw, /"big":\s*12345678901234567890/);
	});

	test('with no pgtools runner connected, the tool result names the fix', async () => {
		const calls = tasks().length;
		// A broker no runner joins, and a short wait for one.
		const { output, results } = await execute(
			workflow,
			(messages) =>
				turn(messages) === 0 ? toolCall('select_query', { table: 'customers', limit: 1 }) : { content: lastResult(messages).error },
			{ env: { N8N_RUNNERS_TASK_REQUEST_TIMEOUT: '2' } },
		);
		assert.match(
			results[0].error,
			/^No pgtools task runner is connected to n8n \(waited \d+ s\)\. Start one beside n8n: pgtools serve --n8n-broker http:\/\/127\.0\.0\.1:5679, with N8N_RUNNERS_AUTH_TOKEN set to the value n8n runs with\.$/,
		);
		assert.equal(output, results[0].error);
		assert.equal(tasks().length, calls);
	});
});

// Act as User: the example's tool nodes act as the user its End user node names (an expression),
// on a runner whose token has act_as and a role, over a table under row-level security on the
// claims' sub (startActAsRunner: alice has two notes, bob one).
describe('acting as the end user (Act as User, row-level security)', () => {
	const workflow = { ...example['act-as-user'], id: 'pgtoolsExActAs02' };
	let actAs;

	before(async () => {
		actAs = await startActAsRunner(bin, runner);
		// The example with a credential for this runner's act_as token.
		const wf = JSON.parse(readFileSync(join(root, 'examples', 'n8n', example['act-as-user'].file), 'utf8'));
		wf.id = workflow.id;
		const cred = { id: 'pgtoolsApiActAs1', name: 'pgtools API (act as)' };
		for (const node of wf.nodes) if (node.credentials?.pgToolsApi) node.credentials.pgToolsApi = cred;
		writeFileSync(join(work, 'act-as-credentials.json'), JSON.stringify([{ ...cred, type: 'pgToolsApi', data: { url: actAs.url, token: actAsTokens.actAs } }]));
		writeFileSync(join(work, 'act-as-workflow.json'), JSON.stringify([wf]));
		await n8nRun(['import:credentials', `--input=${join(work, 'act-as-credentials.json')}`]);
		await n8nRun(['import:workflow', `--input=${join(work, 'act-as-workflow.json')}`]);
	});
	after(async () => await actAs?.stop());

	test('the agent reads and changes only the rows of the user the workflow names; the model never sees whom it acts for', async () => {
		const { output, requests, results } = await execute(workflow, (messages) => {
			switch (turn(messages)) {
				case 0:
					return toolCall('select_query', { table: 'notes', columns: 'owner,body', order_by: 'id' });
				case 1:
					// where true: every row the model can name; row-level security keeps it to alice's.
					return toolCall('update_data', { table: 'notes', set: '{"body": "done"}', where: 'true', autocommit: true });
				default:
					return { content: `You had ${toolResults(messages)[0].rowCount} notes; ${lastResult(messages).rowCount} marked done.` };
			}
		});
		checkToolSchemas(requests[0]);
		for (const t of requests[0].tools) {
			const keys = Object.keys(t.function.parameters.properties ?? {});
			assert.ok(!keys.some((k) => /act_?as|user|subject|^sub$/i.test(k)), `${t.function.name}: no act-as argument among ${keys}`);
		}
		const [read, updated] = results;
		assert.equal(read.success, true, JSON.stringify(read));
		assert.deepEqual(read.data.map((r) => r.owner), ['alice', 'alice'], 'only alice\'s rows were read');
		assert.equal(updated.success, true, JSON.stringify(updated));
		assert.equal(updated.rowCount, 2);
		assert.equal(actAs.sql("SELECT string_agg(owner || '=' || body, ',' ORDER BY id) FROM notes"), 'alice=done,alice=done,bob=b1', 'bob\'s row is untouched');
		assert.equal(output, 'You had 2 notes; 2 marked done.');
		const principals = actAs.logs.filter((l) => l.message === 'request' && l.path.startsWith('/v1/tools/')).map((l) => [l.principal, l.role]);
		assert.deepEqual(principals, [
			['n8n:alice', 'n8n_tenant'],
			['n8n:alice', 'n8n_tenant'],
		]);
	});
});

// n8n's own MCP Client Tool (Streamable HTTP, Bearer Auth credential) on the runner's /mcp.
describe('n8n\'s MCP Client Tool on /mcp', () => {
	test('the agent reads with select_query through MCP', async () => {
		const name = (tool) => `${mcpNodeName}_${tool}`;
		const { output, requests, results, seen } = await execute(example['mcp-client'], (messages) =>
			turn(messages) === 0
				? toolCall(name('select_query'), { table: 'customers', columns: 'id,name', order_by: 'id', limit: 2 })
				: { content: `Two customers: ${JSON.parse(lastResult(messages).response[0].text).data.map((c) => c.name).join(' and ')}.` },
		);
		// The model is offered every tool under the MCP node's prefix, with the schema descriptions.
		const offered = Object.fromEntries(requests[0].tools.map((t) => [t.function.name, t.function]));
		assert.deepEqual(Object.keys(offered).sort(), wireNames.map(name).sort());
		// n8n 2.41.1 turns a schema that combines alternatives at its top level (oneOf, allOf) into
		// one argument "value"; pgtools' schemas have none, so every tool arrives with its own
		// arguments.
		// No approval rule applies to this runner's token, so /mcp lists no approval_id.
		for (const tool of wireNames) {
			const schema = schemaOf(tool);
			const fn = offered[name(tool)];
			const listed = Object.entries(schema.properties).filter(([key]) => key !== 'approval_id');
			assert.equal(fn.description, schema.description, `${tool}: description`);
			assert.deepEqual(Object.keys(fn.parameters.properties), listed.map(([key]) => key), `${tool}: arguments`);
			assert.deepEqual(fn.parameters.required ?? [], schema.required ?? [], `${tool}: required arguments`);
			for (const [key, prop] of listed) {
				assert.equal(fn.parameters.properties[key].description, prop.description, `${tool}.${key}: description`);
			}
		}
		const truth = await call(runner, 'select_query', { table: 'customers', columns: 'id,name', order_by: 'id', limit: 2 });
		// n8n hands the model {response: <content>} plus structuredContent when a server sends it;
		// pgtools sends the HTTP API's answer once, as the text item (mcp.structured_content off).
		const [result] = results;
		assert.equal(result.structuredContent, undefined, `the rows reached the model twice: ${JSON.stringify(result).slice(0, 300)}`);
		assert.equal(result.response.length, 1, JSON.stringify(result));
		const answer = JSON.parse(result.response[0].text);
		assert.equal(answer.success, true, JSON.stringify(result));
		assert.deepEqual(answer.data, truth.data);
		assert.equal(output, `Two customers: ${truth.data.map((c) => c.name).join(' and ')}.`);
		// Every request went to /mcp with the Bearer credential (execute checks the header).
		assert.ok(seen.length > 0 && seen.every((r) => r.path === '/mcp'), JSON.stringify(seen.map((r) => `${r.method} ${r.path}`)));
		assert.ok(seen.some((r) => r.method === 'POST'));
	});
});

// The Custom Tool node (operator-defined tools, custom_tools): the model is offered each picked
// tool with the runner's JSON Schema (integer, array, enum, required), reads with one and
// cancels an order with the other; the effect is checked in PostgreSQL.
describe('the Custom Tool node on a runner with custom_tools', () => {
	const workflow = { ...example.read, id: 'pgtoolsExCustom1' };
	let custom;

	before(async () => {
		const { startCustomToolsRunner } = await import('../test/runner.mjs');
		custom = await startCustomToolsRunner(bin, runner);
		const read = JSON.parse(readFileSync(join(root, 'examples', 'n8n', example.read.file), 'utf8'));
		const cred = { id: 'pgtoolsApiCustom', name: 'pgtools API (custom tools)' };
		const wf = { ...read, id: workflow.id, name: 'pgtools e2e: Custom Tool', nodes: read.nodes.filter((n) => !n.type.startsWith('n8n-nodes-pgtools.')) };
		wf.connections = Object.fromEntries(Object.entries(read.connections).filter(([name]) => wf.nodes.some((n) => n.name === name)));
		['orders_by_status', 'cancel_order'].forEach((tool, i) => {
			wf.nodes.push({
				id: `7c3f0d2e-1b4a-4c8e-9f6d-0a1b2c3d4e5${i}`,
				name: tool === 'orders_by_status' ? 'Orders by Status' : 'Cancel Order',
				type: 'n8n-nodes-pgtools.customTool',
				typeVersion: 1,
				position: [200 + 200 * i, 420],
				parameters: { customTool: tool },
				credentials: { pgToolsApi: cred },
			});
			wf.connections[wf.nodes.at(-1).name] = { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] };
		});
		writeFileSync(join(work, 'custom-credentials.json'), JSON.stringify([{ ...cred, type: 'pgToolsApi', data: { url: custom.url, token: custom.token } }]));
		writeFileSync(join(work, 'custom-workflow.json'), JSON.stringify([wf]));
		await n8nRun(['import:credentials', `--input=${join(work, 'custom-credentials.json')}`]);
		await n8nRun(['import:workflow', `--input=${join(work, 'custom-workflow.json')}`]);
	});
	after(async () => await custom?.stop());

	test('the scripted model reads with one custom tool and cancels an order with the other; values are bound', async () => {
		const [id, customer] = custom.sql("SELECT id || ',' || customer_id FROM orders WHERE status = 'pending' ORDER BY id LIMIT 1").split(',').map(Number);
		const reason = "'; DROP TABLE orders; --";
		const { output, requests, results } = await execute(workflow, (messages) => {
			switch (turn(messages)) {
				case 0:
					return toolCall('orders_by_status', { status: 'pending', customer_ids: [customer], limit: 10 });
				case 1:
					return toolCall('cancel_order', { order_id: lastResult(messages).data[0].id, reason, autocommit: true });
				default:
					return { content: `Cancelled order ${lastResult(messages).data[0].id}.` };
			}
		});
		const offered = Object.fromEntries(requests[0].tools.map((t) => [t.function.name, t.function]));
		assert.deepEqual(Object.keys(offered).sort(), ['cancel_order', 'orders_by_status']);
		const read = offered.orders_by_status;
		assert.equal(read.description, 'Orders of the given customers with one status, lowest id first: id, status, customer_id.');
		assert.deepEqual(read.parameters.properties.status.enum, ['pending', 'paid', 'shipped', 'cancelled']);
		assert.equal(read.parameters.properties.customer_ids.type, 'array');
		assert.equal(read.parameters.properties.customer_ids.items.type, 'integer');
		assert.equal(read.parameters.properties.limit.type, 'integer');
		assert.deepEqual([...read.parameters.required].sort(), ['customer_ids', 'status']);
		assert.deepEqual([...offered.cancel_order.parameters.required].sort(), ['order_id', 'reason']);
		assert.equal(offered.cancel_order.parameters.properties.autocommit.type, 'boolean');
		const [found, cancelled] = results;
		assert.equal(found.success, true, JSON.stringify(found));
		assert.equal(found.data[0].id, id);
		assert.equal(cancelled.success, true, JSON.stringify(cancelled));
		assert.equal(custom.sql(`SELECT status || '|' || note FROM orders WHERE id = ${id}`), `cancelled|${reason}`);
		assert.equal(custom.sql("SELECT to_regclass('orders') IS NOT NULL"), 't');
		assert.equal(output, `Cancelled order ${id}.`);
	});
});

// The Custom Tool example as a user imports it, on a runner started as examples/n8n/README.md
// says (examples/config/custom-tools.json on the demo's database): the model is offered the two
// tools as the config declares them, finds the customer's latest paid order with one and refunds
// it with the other, first as a dry run; the effect and the answer are checked against the runner.
describe('the Custom Tool example on examples/config/custom-tools.json', () => {
	const workflow = example['custom-tool'];
	const config = JSON.parse(readFileSync(join(root, 'examples', 'config', 'custom-tools.json'), 'utf8'));

	test('finds the order with orders_of_customer and refunds it with refund_order (dry run, then autocommit)', async () => {
		const customer = Number(/Customer (\d+)/.exec(workflow.prompt)[1]);
		const reason = /reason "([^"]+)"/.exec(workflow.prompt)[1];
		const latest = await call(customRunner, 'orders_of_customer', { customer_id: customer, statuses: ['paid'], limit: 1 });
		assert.equal(latest.rowCount, 1, JSON.stringify(latest));
		const [order] = latest.data;
		const logged = customRunner.logs.length;
		const { output, requests, results, seen } = await execute(workflow, (messages) => {
			const answers = toolResults(messages);
			switch (answers.length) {
				case 0:
					return toolCall('orders_of_customer', { customer_id: customer, statuses: ['paid'], limit: 1 });
				case 1:
					return toolCall('refund_order', { order_id: answers[0].data[0].id, reason, dry_run: true });
				case 2:
					return toolCall('refund_order', { order_id: answers[0].data[0].id, reason, autocommit: true });
				default: {
					const [found, , done] = answers;
					return { content: `Refunded order #${done.data[0].id} (${found.data[0].total} EUR, placed ${found.data[0].placed_at}); it is now ${done.data[0].status}.` };
				}
			}
		});
		const requestLogs = customRunner.logs.slice(logged).filter((l) => l.message === 'request');

		// What the model was offered: the config's tools, descriptions and parameters, typed, with
		// the arguments pgtools adds (session_id, format; autocommit, dry_run for the write).
		const listed = await (await fetch(`${customRunner.url}/v1/tools`, { headers: { authorization: `Bearer ${customRunner.token}` } })).json();
		const offered = Object.fromEntries(requests[0].tools.map((t) => [t.function.name, t.function]));
		assert.deepEqual(Object.keys(offered).sort(), config.custom_tools.map((t) => t.name).sort());
		for (const tool of config.custom_tools) {
			const fn = offered[tool.name];
			const served = listed.tools.find((t) => t.name === tool.name).inputSchema;
			assert.equal(fn.description, tool.description, `${tool.name}: description`);
			// Every argument with every keyword the runner serves (minimum, maximum, maxLength, default, enum).
			assert.deepEqual(fn.parameters.properties, served.properties, `${tool.name}: arguments`);
			for (const p of tool.parameters) {
				const got = fn.parameters.properties[p.name];
				assert.equal(got.type, p.type, `${tool.name}.${p.name}: type`);
				if (p.items) assert.equal(got.items.type, p.items.type, `${tool.name}.${p.name}: items`);
				if (p.description) assert.equal(got.description, p.description, `${tool.name}.${p.name}: description`);
			}
			assert.deepEqual([...(fn.parameters.required ?? [])].sort(), tool.parameters.filter((p) => p.required).map((p) => p.name).sort(), `${tool.name}: required`);
		}
		assert.equal(offered.refund_order.parameters.properties.autocommit.type, 'boolean');
		assert.equal(offered.refund_order.parameters.properties.dry_run.type, 'boolean');

		const [found, dry, done] = results;
		assert.deepEqual(found.data, latest.data, 'the model read what the runner answers');
		assert.equal(dry.success, true, JSON.stringify(dry));
		assert.equal(dry.dryRun, true);
		assert.equal(dry.affectedRows, 1, JSON.stringify(dry));
		assert.deepEqual(dry.data, [{ id: order.id, status: 'cancelled', note: reason }], 'the row as the refund would leave it');
		// The dry run changed nothing: the autocommit call still found the order paid.
		assert.equal(done.success, true, JSON.stringify(done));
		assert.deepEqual(done.data, [{ id: order.id, status: 'cancelled', note: reason }]);
		const now = await call(customRunner, 'select_query', { table: 'orders', columns: 'id,status,note', where: 'id = $1', params: [order.id] });
		assert.deepEqual(now.data, [{ id: order.id, status: 'cancelled', note: reason }], 'the refund is in PostgreSQL');
		assert.equal(output, `Refunded order #${order.id} (${order.total} EUR, placed ${order.placed_at}); it is now cancelled.`);

		// The calls went to the custom-tools runner with the demo's token (none to the demo's runner).
		assert.deepEqual(seen, []);
		const calls = requestLogs.filter((l) => l.method === 'POST').map((l) => [l.path, l.status]);
		assert.deepEqual(calls, [
			['/v1/tools/orders_of_customer', 200],
			['/v1/tools/refund_order', 200],
			['/v1/tools/refund_order', 200],
		]);
	});
});

approvalSpec({ state: () => ({ approvals }), execute, runData, n8nRun, n8nStart, turn, lastResult, toolCall });
