// A real pgtools runner for the integration and end-to-end tests: `pgtools demo` (a throwaway
// PostgreSQL with the demo shop data, a least-privilege role, and the runner on a free loopback
// port), built from this checkout.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { root } from './helpers.mjs';

/** buildRunner builds cmd/pgtools into a temporary directory (or returns PGTOOLS_BIN). */
export function buildRunner() {
	if (process.env.PGTOOLS_BIN) return process.env.PGTOOLS_BIN;
	const dir = mkdtempSync(join(tmpdir(), 'pgtools-n8n-'));
	process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
	const bin = join(dir, 'pgtools');
	execFileSync('go', ['build', '-o', bin, './cmd/pgtools'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
	return bin;
}

/**
 * launch runs bin with args and resolves once ready, called with each chunk of stdout and stderr
 * and all output so far, returns a value: with that value, the output so far, running() and a
 * stop() that sends SIGTERM and waits for the exit. It rejects, with the output, when the process
 * exits first or ready returns nothing within timeoutMs. what names the process in those errors.
 */
async function launch(bin, args, { what, env = {}, timeoutMs, ready }) {
	const child = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
	let output = '';
	const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
	// Should the test process die without stop(), take the child (and a demo's cluster) with it.
	const orphan = () => child.kill('SIGTERM');
	process.once('exit', orphan);
	exited.then(() => process.off('exit', orphan));
	const value = await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`${what} did not start in ${timeoutMs} ms:\n${output}`)), timeoutMs);
		const onData = (chunk) => {
			output += chunk;
			const found = ready(String(chunk), output);
			if (found !== undefined) {
				clearTimeout(timer);
				resolve(found);
			}
		};
		child.stdout.on('data', onData);
		child.stderr.on('data', onData);
		exited.then(({ code, signal }) => {
			clearTimeout(timer);
			reject(new Error(`${what} exited (${code ?? signal}) before serving:\n${output}`));
		});
	});
	const running = () => child.exitCode === null && child.signalCode === null;
	return {
		value,
		pid: child.pid,
		output: () => output,
		running,
		async stop() {
			if (running()) child.kill('SIGTERM');
			await exited;
		},
	};
}

/**
 * startDemo runs `pgtools demo` and resolves once it serves, with its URL and token and a
 * stop() that ends it (the demo drops its throwaway cluster on SIGTERM).
 */
export async function startDemo(bin, { timeoutMs = 120_000 } = {}) {
	const demo = await launch(bin, ['demo', '--listen', '127.0.0.1:0', '--events', '1000'], {
		what: 'pgtools demo',
		timeoutMs,
		ready: (_, output) => {
			const m = /export PGTOOLS_URL=(\S+) PGTOOLS_TOKEN=(\S+)/.exec(output);
			if (!m) return undefined;
			// The throwaway cluster trusts every local connection, so a second runner can
			// connect as the demo's least-privilege role without its (random) password.
			const pg = /PostgreSQL is up on (127\.0\.0\.1:\d+)/.exec(output);
			const databaseUrl = pg ? `postgres://pgtools_demo@${pg[1]}/pgtools_demo?sslmode=disable` : undefined;
			return { url: m[1], token: m[2], databaseUrl };
		},
	});
	return { ...demo.value, output: demo.output, stop: demo.stop };
}

/** call posts a tool call straight to the runner (to set up and check state apart from the nodes). */
export async function call(runner, tool, args) {
	const response = await fetch(`${runner.url}/v1/tools/${tool}`, {
		method: 'POST',
		headers: { authorization: `Bearer ${runner.token}`, 'content-type': 'application/json' },
		body: JSON.stringify(args),
	});
	return await response.json();
}

/**
 * startServe runs `pgtools serve` with args and env added to the process environment, and
 * resolves once it serves, with its URL, its parsed JSON log lines (logs, live), and a stop().
 */
export async function startServe(bin, args, { env = {}, timeoutMs = 30_000 } = {}) {
	const logs = [];
	let partial = '';
	const serve = await launch(bin, ['serve', '--listen', '127.0.0.1:0', ...args], {
		what: 'pgtools serve',
		env,
		timeoutMs,
		ready: (chunk) => {
			const lines = (partial + chunk).split('\n');
			partial = lines.pop();
			let url;
			for (const line of lines) {
				let entry;
				try {
					entry = JSON.parse(line);
				} catch {
					continue;
				}
				logs.push(entry);
				if (entry.message === 'pgtools serving') url = `http://${entry.listen}`;
			}
			return url;
		},
	});
	return { url: serve.value, logs, pid: serve.pid, running: serve.running, stop: serve.stop };
}

/**
 * serveWithConfig writes config as the JSON file of a temporary directory (named for name and
 * removed at exit) and starts `pgtools serve --config` on it with info logs.
 */
async function serveWithConfig(bin, name, config) {
	const dir = mkdtempSync(join(tmpdir(), `pgtools-${name}-`));
	process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
	const file = join(dir, 'config.json');
	writeFileSync(file, JSON.stringify(config));
	return await startServe(bin, ['--config', file], { env: { PGTOOLS_LOG_LEVEL: 'info' } });
}

/**
 * psql runs SQL as the superuser of pgtools demo's throwaway cluster (which trusts local
 * connections) in database db, and returns the rows as text.
 */
export function psql(demo, db, sql) {
	const port = /127\.0\.0\.1:(\d+)/.exec(demo.databaseUrl)[1];
	return execFileSync('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1', '-p', port, '-U', 'postgres', '-d', db], {
		input: sql,
		encoding: 'utf8',
	}).trim();
}

// actAsSetup is docs/identity.md's "Database setup for agent roles" with a table whose row-level
// security reads the claims' sub: authenticator n8n_auth (the runner's login), agent role
// n8n_tenant, database actas, notes of alice (two) and bob (one). nullif: once a pooled
// connection has run a call with claims, the setting reads '' (not NULL) in a call without,
// and ''::jsonb is an error rather than no rows.
const actAsSetup = `
CREATE ROLE n8n_auth LOGIN NOINHERIT;
CREATE ROLE n8n_tenant NOLOGIN;
GRANT n8n_tenant TO n8n_auth;
CREATE DATABASE actas;
\\c actas
GRANT USAGE ON SCHEMA public TO n8n_tenant;
CREATE TABLE notes (
  id serial PRIMARY KEY,
  owner text NOT NULL DEFAULT (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub'),
  body text NOT NULL);
GRANT SELECT, INSERT, UPDATE, DELETE ON notes TO n8n_tenant;
GRANT USAGE ON SEQUENCE notes_id_seq TO n8n_tenant;
REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO n8n_auth;
REVOKE USAGE ON LANGUAGE plpgsql FROM PUBLIC;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_catalog.pg_prepared_statement() FROM PUBLIC;
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_notes ON notes
  USING (owner = nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
  WITH CHECK (owner = nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub');
INSERT INTO notes (owner, body) VALUES ('alice', 'a1'), ('alice', 'a2'), ('bob', 'b1');
`;

/** actAsTokens are the act-as runner's tokens: "n8n" may act for end users, "plain" may not; both run as n8n_tenant. */
export const actAsTokens = { actAs: 'n8n-acts-for-users-0123456789', plain: 'n8n-plain-token-0123456789ab' };

/**
 * startActAsRunner sets up database actas in the demo's cluster (actAsSetup) and starts
 * `pgtools serve` on it as n8n_auth with actAsTokens; it resolves to startServe's runner plus
 * sql(text), which runs SQL in actas as the superuser.
 */
export async function startActAsRunner(bin, demo) {
	psql(demo, 'postgres', actAsSetup);
	const runner = await serveWithConfig(bin, 'actas', {
		tokens: [
			{ name: 'n8n', token: actAsTokens.actAs, scopes: ['read', 'write'], role: 'n8n_tenant', act_as: true },
			{ name: 'plain', token: actAsTokens.plain, scopes: ['read', 'write'], role: 'n8n_tenant' },
		],
		databases: { default: { url: demo.databaseUrl.replace('pgtools_demo@', 'n8n_auth@').replace('/pgtools_demo?', '/actas?') } },
	});
	return { ...runner, sql: (text) => psql(demo, 'actas', text) };
}

/** customToolsToken is the custom-tools runner's token (read and write). */
export const customToolsToken = 'n8n-custom-tools-token-0123456789';

/**
 * customTools are the custom-tools runner's operator-defined tools on the demo data: a read
 * with an enum, an integer array and a bounded integer, and a write with two required values.
 */
export const customTools = [
	{
		name: 'orders_by_status',
		description: 'Orders of the given customers with one status, lowest id first: id, status, customer_id.',
		sql: 'SELECT id, status, customer_id FROM orders WHERE status = $1 AND customer_id = ANY($2) ORDER BY id LIMIT $3',
		parameters: [
			{ name: 'status', type: 'string', required: true, enum: ['pending', 'paid', 'shipped', 'cancelled'], description: 'The order status.' },
			{ name: 'customer_ids', type: 'array', items: { type: 'integer' }, required: true, description: 'Customer ids.' },
			{ name: 'limit', type: 'integer', default: 5, minimum: 1, maximum: 50, description: 'Most orders to return.' },
		],
	},
	{
		name: 'cancel_order',
		description: 'Cancel one pending order, noting the reason. Changes one row; returns it.',
		mode: 'write',
		sql: "UPDATE orders SET status = 'cancelled', note = $2 WHERE id = $1 AND status = 'pending' RETURNING id, status, note",
		parameters: [
			{ name: 'order_id', type: 'integer', required: true, minimum: 1, description: 'The order\'s id.' },
			{ name: 'reason', type: 'string', required: true, maxLength: 200, description: 'Why, in the customer\'s words.' },
		],
	},
];

/**
 * startCustomToolsRunner starts `pgtools serve` on the demo's database (as its least-privilege
 * role) with customTools and customToolsToken; it resolves to startServe's runner plus its token
 * and sql(text), which runs SQL in the demo database as the superuser.
 */
export async function startCustomToolsRunner(bin, demo) {
	const runner = await serveWithConfig(bin, 'custom', {
		tokens: [{ name: 'n8n', token: customToolsToken, scopes: ['read', 'write'] }],
		databases: { default: { url: demo.databaseUrl } },
		custom_tools: customTools,
	});
	return { ...runner, token: customToolsToken, sql: (text) => psql(demo, 'pgtools_demo', text) };
}

/** approvalTokens are the approvals runner's tokens: the agent's (which holds approve too, and still cannot decide its own requests), a person's approver token, and a read token. */
export const approvalTokens = {
	agent: 'n8n-agent-approvals-0123456789',
	approver: 'n8n-approver-alice-0123456789',
	reader: 'n8n-reader-approvals-0123456789',
};

// approvalSetup is a table whose rows the approval tests delete in batches, in the demo database.
const approvalSetup = `
CREATE TABLE approval_items (id serial PRIMARY KEY, batch int NOT NULL);
GRANT SELECT, INSERT, UPDATE, DELETE ON approval_items TO pgtools_demo;
GRANT USAGE ON SEQUENCE approval_items_id_seq TO pgtools_demo;
`;

/**
 * startApprovalRunner starts `pgtools serve` on the demo's database (as its least-privilege role)
 * with policy.require_approval rows_over 100, approvals.ttl_seconds ttlSeconds and
 * approvalTokens; it resolves to startServe's runner plus sql(text), which runs SQL in the demo
 * database as the superuser. The first call creates the table approval_items.
 */
export async function startApprovalRunner(bin, demo, { ttlSeconds = 600 } = {}) {
	const sql = (text) => psql(demo, 'pgtools_demo', text);
	if (sql("SELECT to_regclass('public.approval_items') IS NULL") === 't') sql(approvalSetup);
	const runner = await serveWithConfig(bin, 'approvals', {
		tokens: [
			{ name: 'n8n-agent', token: approvalTokens.agent, scopes: ['read', 'write', 'approve'] },
			{ name: 'alice', token: approvalTokens.approver, scopes: ['approve'] },
			{ name: 'reader', token: approvalTokens.reader, scopes: ['read'] },
		],
		databases: { default: { url: demo.databaseUrl, policy: { require_approval: [{ when: 'rows_over', rows: 100 }] } } },
		approvals: { ttl_seconds: ttlSeconds },
	});
	return { ...runner, sql };
}
