// Each node's execute() against a real runner and PostgreSQL (`pgtools demo`), with the HTTP
// helper n8n would give it: the credential's authenticate headers applied, the runner's
// answers returned whatever their status.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { context, loadCredential, loadNode, toolNames } from '../helpers.mjs';
import { buildRunner, call, startDemo, startServe } from '../runner.mjs';

let runner;
let skip = false;
try {
	runner = await startDemo(buildRunner());
} catch (error) {
	// Without Go or PostgreSQL's server binaries the test cannot run; CI must have both.
	if (process.env.CI) throw error;
	skip = `no runner: ${String(error.message).split('\n')[0]} (make deps installs what is missing)`;
}
after(async () => await runner?.stop());

const credential = loadCredential();

// http is httpRequestWithAuthentication as n8n performs it for the pgtools API credential.
function http(credentials) {
	return async (options) => {
		const headers = { 'content-type': 'application/json', ...options.headers };
		for (const [name, value] of Object.entries(credential.authenticate.properties.headers)) {
			headers[name] = value.replace(/^=/, '').replace('{{$credentials.token}}', credentials.token);
		}
		const body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
		const response = await fetch(options.url, { method: options.method, headers, body });
		const text = await response.text();
		// encoding 'text' hands the node the body as received; otherwise n8n parses JSON.
		let answer = text;
		if (options.encoding !== 'text') {
			try {
				answer = JSON.parse(text);
			} catch {}
		}
		if (!options.ignoreHttpStatusErrors && response.status >= 400) throw new Error(`HTTP ${response.status}`);
		return { statusCode: response.status, body: answer, headers: Object.fromEntries(response.headers) };
	};
}

// run executes a node and returns its items' json. As a tool, an error answer fails the run
// and the model reads the error's message (n8n's AI Agent, buildObservation): run returns the
// error object that message holds, marked failed.
async function run(className, args, options = {}) {
	const node = loadNode(className);
	const credentials = options.credentials ?? { url: runner.url, token: runner.token };
	const ctx = context(node, { args, credentials, request: http(credentials), ...options });
	try {
		const out = await node.execute.call(ctx);
		return out[0].map((item) => item.json);
	} catch (error) {
		if (options.asTool === false) throw error;
		let answer;
		try {
			answer = JSON.parse(error.message);
		} catch {
			throw error;
		}
		assert.equal(answer.success, false, 'a tool run fails only for an error answer');
		return [Object.defineProperty(answer, 'failed', { value: true })];
	}
}

// closedPort is a loopback port nothing listens on.
async function closedPort() {
	const server = createServer();
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	const { port } = server.address();
	await new Promise((resolve) => server.close(resolve));
	return port;
}

const email = (tag) => `${tag}-${process.pid}@example.com`;

async function customerCount(address) {
	const r = await call(runner, 'select_query', { table: 'customers', where: 'email = $1', params: [address] });
	assert.equal(r.success, true, JSON.stringify(r));
	return r.rowCount;
}

describe('nodes against a real runner', { skip }, () => {
	test('Describe Schema lists the tables and describes one', async () => {
		const [list, one] = await run('DescribeSchema', [{}, { table: 'orders' }]);
		assert.equal(list.success, true);
		assert.ok(JSON.stringify(list).includes('customers'));
		assert.equal(one.success, true);
		assert.ok(JSON.stringify(one).includes('customer_id'));
	});

	test('Select Query reads rows with a filter, columns, order and limit', async () => {
		const [r] = await run('SelectQuery', [
			{ table: 'orders', columns: 'id,status', where: 'status = $1', params: '["paid"]', order_by: 'id', limit: 3 },
		]);
		assert.equal(r.success, true, JSON.stringify(r));
		assert.equal(r.rowCount, 3);
		assert.deepEqual(Object.keys(r.data[0]), ['id', 'status']);
		assert.ok(r.data.every((row) => row.status === 'paid'));
		assert.equal(r.truncated, true);
	});

	test('Select Query pages with next_page: page_token continues right after the last row', async () => {
		const args = { table: 'orders', columns: 'id,status', where: 'status = $1', params: '["paid"]', order_by: 'id', limit: 3 };
		const [first] = await run('SelectQuery', [args]);
		assert.equal(first.truncated, true, JSON.stringify(first));
		assert.equal(typeof first.next_page, 'string');
		const [second] = await run('SelectQuery', [{ ...args, page_token: first.next_page }]);
		assert.equal(second.success, true, JSON.stringify(second));
		const [after] = await run('SelectQuery', [{ ...args, limit: 6 }]);
		assert.deepEqual(second.data, after.data.slice(3, 6), 'the second page is the rows after the first');
	});

	test('a mistake comes back with errorType and a suggestion that fixes it', async () => {
		const [r] = await run('SelectQuery', [{ table: 'customers', columns: 'id,nmae', limit: 1 }]);
		assert.equal(r.success, false);
		assert.equal(r.errorType, 'invalid_column');
		assert.match(r.suggestion, /name/);
		const [fixed] = await run('SelectQuery', [{ table: 'customers', columns: 'id,name', limit: 1 }]);
		assert.equal(fixed.success, true);
	});

	test('Insert Data with autocommit writes; without intent it is refused', async () => {
		const a = email('insert');
		const [refused] = await run('InsertData', [{ table: 'customers', row: JSON.stringify({ name: 'Ann', email: a }) }]);
		assert.equal(refused.errorType, 'write_intent_required');
		assert.equal(await customerCount(a), 0);
		const [r] = await run('InsertData', [{ table: 'customers', rows: JSON.stringify([{ name: 'Ann', email: a }]), returning: 'id,email', autocommit: true }]);
		assert.equal(r.success, true, JSON.stringify(r));
		assert.deepEqual(Object.keys(r.data[0]), ['id', 'email']);
		assert.equal(await customerCount(a), 1);
		const [again] = await run('InsertData', [
			{ table: 'customers', row: { name: 'Ann', email: a }, on_conflict: '{"columns": "email", "action": "nothing"}', autocommit: true },
		]);
		assert.equal(again.success, true, JSON.stringify(again));
		assert.equal(again.affectedRows, 0);
	});

	test('Update Data: without intent write_intent_required, dry run changes nothing, autocommit updates', async () => {
		const [refused] = await run('UpdateData', [{ table: 'orders', set: '{"note": "x"}', where: 'id = $1', params: '[1]' }]);
		assert.equal(refused.errorType, 'write_intent_required');
		assert.ok(refused.suggestion.includes('autocommit'));
		const [dry] = await run('UpdateData', [{ table: 'orders', set: { note: 'dry' }, where: 'id = $1', params: [1], dry_run: true }]);
		assert.equal(dry.success, true, JSON.stringify(dry));
		const note = `n8n ${process.pid}`;
		const [r] = await run('UpdateData', [{ table: 'orders', set: { note }, where: 'id = $1', params: [1], autocommit: true }]);
		assert.equal(r.success, true, JSON.stringify(r));
		assert.equal(r.affectedRows, 1);
		const check = await call(runner, 'select_query', { table: 'orders', columns: 'note', where: 'id = 1' });
		assert.equal(check.data[0].note, note);
	});

	test('Delete Data with max_affected_rows refuses a wide delete, and deletes a narrow one', async () => {
		const a = email('delete');
		await call(runner, 'insert_data', { table: 'customers', row: { name: 'Del', email: a }, autocommit: true });
		const [wide] = await run('DeleteData', [{ table: 'order_items', where: 'quantity > 0', max_affected_rows: 1, autocommit: true }]);
		assert.equal(wide.errorType, 'too_many_rows');
		const [r] = await run('DeleteData', [{ table: 'customers', where: 'email = $1', params: [a], autocommit: true }]);
		assert.equal(r.success, true, JSON.stringify(r));
		assert.equal(r.affectedRows, 1);
		assert.equal(await customerCount(a), 0);
	});

	test('Execute SQL reads, and writes only with mode write and intent', async () => {
		const [read] = await run('ExecuteSql', [{ sql: 'select count(*)::int as n from products where price > $1', params: [10] }]);
		assert.equal(read.success, true, JSON.stringify(read));
		assert.equal(typeof read.data[0].n, 'number');
		const [ro] = await run('ExecuteSql', [{ sql: 'update orders set note = $1 where id = 2', params: ['x'] }]);
		assert.equal(ro.errorType, 'read_only_violation');
		const [w] = await run('ExecuteSql', [{ sql: 'update orders set note = $1 where id = 2', params: ['sql'], mode: 'write', autocommit: true }]);
		assert.equal(w.success, true, JSON.stringify(w));
	});

	test('Transaction Session: begin, insert, read inside, commit — and rollback', async () => {
		for (const end of ['commit', 'rollback']) {
			const a = email(`tx-${end}`);
			const [begin] = await run('TransactionSession', [{ action: 'begin' }]);
			assert.equal(begin.success, true, JSON.stringify(begin));
			const session = begin.session_id;
			const [ins] = await run('InsertData', [{ table: 'customers', row: { name: 'Tx', email: a }, session_id: session }]);
			assert.equal(ins.success, true, JSON.stringify(ins));
			const [inside] = await run('SelectQuery', [{ table: 'customers', where: 'email = $1', params: [a], session_id: session }]);
			assert.equal(inside.rowCount, 1, 'the session sees its own insert');
			assert.equal(await customerCount(a), 0, 'others do not, before the end');
			const [done] = await run('TransactionSession', [{ action: end, session_id: session }]);
			assert.equal(done.success, true, JSON.stringify(done));
			assert.equal(await customerCount(a), end === 'commit' ? 1 : 0);
			const [gone] = await run('SelectQuery', [{ table: 'customers', session_id: session }]);
			assert.match(gone.errorType, /session_(not_found|expired)/);
		}
	});

	test('Atomic Transaction commits all statements or none', async () => {
		const a = email('atomic');
		const [r] = await run('AtomicTransaction', [
			{
				operations: [
					{ sql: 'insert into customers (name, email) values ($1, $2)', params: ['At', a] },
					{ sql: 'select count(*)::int as n from customers where email = $1', params: [a] },
				],
			},
		]);
		assert.equal(r.success, true, JSON.stringify(r));
		assert.equal(r.status, 'committed');
		assert.equal(await customerCount(a), 1);
		const b = email('atomic-fail');
		const [bad] = await run('AtomicTransaction', [
			{
				operations: JSON.stringify([
					{ sql: 'insert into customers (name, email) values ($1, $2)', params: ['At', b] },
					{ sql: 'insert into customers (name, email) values ($1, $2)', params: ['At', a] },
				]),
			},
		]);
		assert.equal(bad.success, false);
		assert.equal(bad.errorType, 'constraint_violation');
		assert.equal(await customerCount(b), 0, 'the first statement was rolled back');
	});

	test('as a workflow node, an error answer fails the node with the runner\'s words', async () => {
		await assert.rejects(run('SelectQuery', [{ table: 'custmers' }], { asTool: false }), (error) => {
			assert.match(error.message, /custmers/);
			assert.match(error.description, /^invalid_table: .*customers/);
			return true;
		});
	});

	test('the credential test: a runner answers its request with 200, and a wrong token or path with a status that has a rule', async () => {
		// n8n sends the credential's test request itself (with the bearer header); what is checked
		// here is that the runner's real answers are the ones the rules name.
		const { request, rules } = credential.test;
		const rule = (status) => rules.find((r) => r.type === 'responseCode' && r.properties.value === status);
		const ask = async (base, token) => {
			const response = await fetch(`${base.replace(/\/+$/, '')}${request.url}`, {
				method: request.method,
				headers: { Authorization: `Bearer ${token}` },
			});
			return { status: response.status, body: await response.text() };
		};
		const ok = await ask(`${runner.url}/`, runner.token);
		assert.equal(ok.status, 200);
		assert.equal(JSON.parse(ok.body).tools.length, toolNames.length, 'the runner lists every tool the package has a node for');
		const denied = await ask(runner.url, 'not-a-token-0123456789');
		assert.ok(rule(denied.status), `a rule for a wrong token's HTTP ${denied.status}`);
		assert.match(rule(denied.status).properties.message, /refused this token/);
		const wrongPath = await ask(`${runner.url}/v1`, runner.token);
		assert.ok(rule(wrongPath.status), `a rule for a /v1 URL's HTTP ${wrongPath.status}`);
		assert.match(rule(wrongPath.status).properties.message, /without \/v1/);
	});

	test('a wrong token is answered as authentication_error; an unreachable runner fails in plain words', async () => {
		const [denied] = await run('SelectQuery', [{ table: 'orders' }], { credentials: { url: runner.url, token: 'wrong-token-0123456789' } });
		assert.equal(denied.errorType, 'authentication_error');
		const closed = await closedPort();
		await assert.rejects(
			run('SelectQuery', [{ table: 'orders' }], { credentials: { url: `http://127.0.0.1:${closed}`, token: 'x' } }),
			(error) => {
				// The fix is in the message: n8n gives the model only the message of a failed tool run.
				assert.equal(
					error.message,
					`Cannot reach the pgtools runner at http://127.0.0.1:${closed} (ECONNREFUSED). Check that pgtools serve is running and that the URL in the pgtools API credential is its address, e.g. http://127.0.0.1:8080.`,
				);
				return true;
			},
		);
	});

	test('numbers past 2^53 and 30-digit numerics go through exactly, both ways', async () => {
		const kind = `big-${process.pid}`;
		// JavaScript reads both n as 9007199254740992: only exact forwarding keeps them apart.
		const rows = `[{"kind": "${kind}", "payload": {"n": 9007199254740992}}, {"kind": "${kind}", "payload": {"n": 9007199254740993, "big": 12345678901234567890, "neg": -9007199254740995, "num": 123456789012345678901234567890.5}}]`;
		const [inserted] = await run('InsertData', [{ table: 'events', rows, returning: 'id', autocommit: true }]);
		assert.equal(inserted.success, true, JSON.stringify(inserted));
		const [read] = await run('SelectQuery', [
			{ table: 'events', columns: 'payload', where: 'kind = $1 and (payload->>\'n\')::numeric = $2', params: `["${kind}", 9007199254740993]` },
		]);
		assert.equal(read.success, true, JSON.stringify(read));
		assert.equal(read.rowCount, 1, 'params selected the row with …993, not its neighbour');
		// Numbers JavaScript cannot hold reach the item as strings of their exact digits.
		assert.deepEqual(read.data[0].payload, { n: '9007199254740993', big: '12345678901234567890', neg: '-9007199254740995', num: '123456789012345678901234567890.5' });
		const raw = await fetch(`${runner.url}/v1/tools/select_query`, {
			method: 'POST',
			headers: { authorization: `Bearer ${runner.token}`, 'content-type': 'application/json' },
			body: `{"table": "events", "columns": "payload", "where": "kind = $1", "params": ["${kind}"], "order_by": "id"}`,
		}).then((r) => r.text());
		assert.match(raw, /"n":\s*9007199254740992\}.*"n":\s*9007199254740993/s, 'PostgreSQL holds both exact values');
		assert.match(raw, /"big":\s*12345678901234567890/);
		assert.match(raw, /"num":\s*123456789012345678901234567890\.5/);
	});

	test('a number n8n already rounded is refused with the fix, never written', async () => {
		const kind = `rounded-${process.pid}`;
		const [refused] = await run('InsertData', [{ table: 'events', row: { kind, payload: { n: 9007199254740993 } }, autocommit: true }]);
		assert.equal(refused.errorType, 'invalid_arguments');
		assert.match(refused.error, /row\.payload\.n: a number JavaScript cannot hold exactly/);
		assert.match(refused.suggestion, /as a JSON string/);
		const count = await call(runner, 'select_query', { table: 'events', where: 'kind = $1', params: [kind] });
		assert.equal(count.rowCount, 0);
	});

	test('the response size limit cuts a default read and says so', async () => {
		const [read] = await run('SelectQuery', [{ table: 'events' }], { pinned: { responseSizeLimit: 4096 } });
		assert.equal(read.success, true, JSON.stringify(read));
		assert.equal(read.truncated, true);
		assert.match(read.hint, /4096-byte response cap/);
		assert.ok(JSON.stringify(read.data).length <= 4096, `${JSON.stringify(read.data).length} bytes of rows`);
	});

	test('Max Estimated Rows refuses a read planned over it with too_expensive, and Explain Query shows the plan', async () => {
		const [refused] = await run('SelectQuery', [{ table: 'events' }], { pinned: { maxEstimatedRows: 10 } });
		assert.equal(refused.errorType, 'too_expensive', JSON.stringify(refused));
		assert.match(refused.error, /over max_estimated_rows 10/);
		assert.ok(refused.plan && refused.plan.scans.length > 0, JSON.stringify(refused));
		const [plan] = await run('ExplainQuery', [{ sql: 'select * from events where id = $1', params: [1] }]);
		assert.equal(plan.success, true, JSON.stringify(plan));
		assert.equal(plan.operation, 'explain');
		assert.ok(plan.scans.length > 0);
	});

	test('an explicit limit equal to the schema default (1000) reaches the runner; an omitted one is the operator\'s default_limit', async () => {
		// A second runner on the demo database whose operator set default_limit 5.
		const dir = mkdtempSync(join(tmpdir(), 'pgtools-limit-'));
		const token = 'limit-test-token-0123456789';
		const config = join(dir, 'config.json');
		writeFileSync(config, JSON.stringify({ databases: { default: { url: runner.databaseUrl, policy: { default_limit: 5 } } }, tokens: [{ name: 'n8n', token, scopes: ['read'] }] }));
		const serve = await startServe(buildRunner(), ['--config', config]);
		try {
			const options = { credentials: { url: serve.url, token }, pinned: { responseSizeLimit: 0 } };
			const [explicit] = await run('SelectQuery', [{ table: 'events', columns: 'id', limit: 1000 }], options);
			assert.equal(explicit.success, true, JSON.stringify(explicit).slice(0, 300));
			assert.equal(explicit.rowCount, 1000, 'limit: 1000 was sent, not dropped as the schema default');
			const [omitted] = await run('SelectQuery', [{ table: 'events', columns: 'id' }], options);
			assert.equal(omitted.rowCount, 5, 'no limit given: the operator\'s default_limit');
			assert.equal(omitted.truncated, true);
		} finally {
			await serve.stop();
			rmSync(dir, { recursive: true, force: true });
		}
	});
});
