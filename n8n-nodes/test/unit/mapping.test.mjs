// Parameter → request mapping and answer handling, with the runner replaced by a stub.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { builtInTools } from '../../scripts/generate.mjs';
import { answer, context, loadNode, toolParameters } from '../helpers.mjs';

const ok = async () => answer(200, { success: true, operation: 'x' });

// run executes a node. As a tool, an error answer fails the run and n8n hands the model the
// error's message: run then returns, as the single item, the error object that message holds
// (and the error itself as thrown).
async function run(className, options) {
	const node = loadNode(className);
	const ctx = context(node, { request: ok, ...options });
	try {
		const out = await node.execute.call(ctx);
		return { ctx, out, items: out[0], calls: ctx.calls };
	} catch (thrown) {
		if (options.asTool === false) throw thrown;
		const json = JSON.parse(thrown.message);
		assert.equal(json.success, false, 'only an error answer fails a tool run');
		return { ctx, items: [{ json }], calls: ctx.calls, thrown };
	}
}

test('a model call with only the required argument sends only that', async () => {
	const { calls, items } = await run('SelectQuery', { args: [{ table: 'orders' }] });
	assert.equal(calls.length, 1);
	const { credentialType, options } = calls[0];
	assert.equal(credentialType, 'pgToolsApi');
	assert.equal(options.method, 'POST');
	assert.equal(options.url, 'http://runner.test:8080/v1/tools/select_query', 'trailing slash of the URL dropped');
	assert.deepEqual(options.body, { table: 'orders' });
	// As a tool, the answer is capped at the node's response size limit (16 KiB by default).
	assert.deepEqual(options.headers, { 'Content-Type': 'application/json', Accept: 'application/json', 'X-PgTools-Max-Response-Bytes': '16384' });
	assert.equal(options.encoding, 'text', 'the answer is read as text, so no number is rounded');
	assert.equal(options.bodyText, '{"table":"orders"}', 'the body is sent as JSON text');
	assert.equal(options.ignoreHttpStatusErrors, true);
	assert.equal(options.returnFullResponse, true);
	assert.deepEqual(items, [{ json: { success: true, operation: 'x' }, pairedItem: { item: 0 } }]);
});

test('every argument is forwarded as given, schema defaults included; empty values are not', async () => {
	const session = '9ffcaa13-4488-4720-bcdb-020aab9b510d';
	const { calls } = await run('SelectQuery', {
		args: [
			{
				table: 'orders',
				columns: 'id,total',
				where: 'status = $1 and total > $2',
				params: '["paid", 100]',
				order_by: 'total desc',
				limit: 5,
				offset: 0,
				database: 'default',
				session_id: session,
			},
			{ table: 'orders', limit: 1000, columns: '*', where: '', session_id: '', params: '' },
		],
	});
	assert.deepEqual(calls[0].options.body, {
		table: 'orders',
		columns: 'id,total',
		where: 'status = $1 and total > $2',
		params: ['paid', 100],
		order_by: 'total desc',
		limit: 5,
		offset: 0,
		database: 'default',
		session_id: session,
	});
	assert.equal(calls[0].options.headers['X-PgTools-Session'], session);
	// An explicit limit of 1000 must reach the runner: the operator's default_limit applies only when none is given.
	assert.deepEqual(calls[1].options.body, { table: 'orders', limit: 1000, columns: '*' }, 'values equal to schema defaults are sent');
	assert.equal(calls[1].options.headers['X-PgTools-Session'], undefined, 'no empty session header');
});

test('JSON arguments given as text are sent as JSON; lists may be arrays', async () => {
	const { calls } = await run('InsertData', {
		args: [
			{
				table: 'customers',
				rows: '[{"name": "Ann", "email": "ann@example.com"}]',
				on_conflict: '{"columns": "email", "action": "nothing"}',
				returning: ['id', 'email'],
				autocommit: true,
			},
			{ table: 'customers', row: { name: 'Bob' }, autocommit: false },
		],
	});
	assert.deepEqual(calls[0].options.body, {
		table: 'customers',
		rows: [{ name: 'Ann', email: 'ann@example.com' }],
		on_conflict: { columns: 'email', action: 'nothing' },
		returning: ['id', 'email'],
		autocommit: true,
	});
	assert.deepEqual(calls[1].options.body, { table: 'customers', row: { name: 'Bob' } }, 'autocommit false is the default: not sent');
});

test('a value that is not JSON becomes an invalid_arguments answer, without a request', async () => {
	const { calls, items } = await run('UpdateData', {
		args: [{ table: 'orders', set: '{"status": "paid"', where: 'id = $1', params: '[1]', limit: 3 }],
	});
	assert.equal(calls.length, 0);
	assert.equal(items[0].json.success, false);
	assert.equal(items[0].json.errorType, 'invalid_arguments');
	assert.match(items[0].json.error, /set is not valid JSON/);
	assert.ok(items[0].json.suggestion);
});

test('shapes are the runner\'s to check: a JSON array for set is forwarded as written', async () => {
	const { calls } = await run('UpdateData', { args: [{ table: 'orders', set: '[1]', where: 'id = 1' }] });
	assert.equal(calls[0].options.bodyText, '{"table":"orders","set":[1],"where":"id = 1"}');
});

test('a pinned parameter is sent as pinned', async () => {
	const { calls } = await run('DeleteData', {
		args: [{ where: 'id = $1', params: [7], dry_run: true, max_affected_rows: 0 }],
		pinned: { table: 'orders' },
	});
	assert.deepEqual(calls[0].options.body, { table: 'orders', where: 'id = $1', params: [7], dry_run: true });
});

test('pg_tx commit carries the session in the body and the header', async () => {
	const session = '0b6f1c8e-1111-4222-8333-944455556666';
	const { calls } = await run('TransactionSession', { args: [{ action: 'commit', session_id: session }] });
	assert.equal(calls[0].options.url, 'http://runner.test:8080/v1/tools/pg_tx');
	assert.deepEqual(calls[0].options.body, { action: 'commit', session_id: session });
	assert.equal(calls[0].options.headers['X-PgTools-Session'], session);
});

test('pg_transaction sends operations as JSON and has no action parameter', async () => {
	const node = loadNode('AtomicTransaction');
	assert.deepEqual(toolParameters(node.description).map((p) => p.name), ['database', 'operations', 'approvalId']);
	const { calls } = await run('AtomicTransaction', {
		args: [{ operations: [{ sql: 'update t set x = $1', params: [1] }, { sql: 'select 1' }] }],
	});
	assert.deepEqual(calls[0].options.body, { operations: [{ sql: 'update t set x = $1', params: [1] }, { sql: 'select 1' }] });
});

test('execute_sql: mode and confirm_destructive are forwarded as given', async () => {
	const { calls } = await run('ExecuteSql', {
		args: [
			{ sql: 'select 1', mode: 'read' },
			{ sql: 'delete from t where id = $1', params: [1], mode: 'write', autocommit: true, confirm_destructive: true },
		],
	});
	assert.deepEqual(calls[0].options.body, { sql: 'select 1', mode: 'read' });
	assert.deepEqual(calls[1].options.body, {
		sql: 'delete from t where id = $1',
		params: [1],
		mode: 'write',
		confirm_destructive: true,
		autocommit: true,
	});
});

const refused = {
	success: false,
	operation: 'update',
	error: 'update_data changes data, so it needs stated intent: autocommit: true or a session_id',
	errorType: 'write_intent_required',
	suggestion: 'Either add "autocommit": true …',
};

test('as a tool, an error answer fails the run; its message is the whole error object, for the model', async () => {
	const text = JSON.stringify(refused);
	const { items, thrown } = await run('UpdateData', {
		args: [{ table: 'orders', set: { status: 'paid' }, where: 'id = 1' }],
		// The runner's text, as n8n hands it over with encoding text.
		request: async () => answer(400, text),
	});
	// n8n marks the tool run failed and gives the model [{"error": <message>}] (buildObservation).
	assert.equal(thrown.constructor.name, 'NodeOperationError');
	assert.equal(thrown.message, text, 'the runner\'s answer, byte for byte');
	assert.equal(thrown.description, `write_intent_required: ${refused.suggestion}`);
	assert.deepEqual(items, [{ json: refused }]);
});

test('as a tool with continue on fail, an error answer is the item', async () => {
	const node = loadNode('UpdateData');
	const ctx = context(node, {
		args: [{ table: 'orders', set: { status: 'paid' }, where: 'id = 1' }],
		request: async () => answer(400, JSON.stringify(refused)),
		continueOnFail: true,
	});
	assert.deepEqual((await node.execute.call(ctx))[0], [{ json: refused, pairedItem: { item: 0 } }]);
});

test('an error message that names a system error code is kept as it is', async () => {
	// n8n's error constructors replace a message that mentions e.g. EPERM with a generic sentence.
	const odd = { ...refused, error: 'Column "typepermissions" does not exist' };
	const { thrown } = await run('UpdateData', {
		args: [{ table: 'orders', set: { status: 'paid' }, where: 'id = 1' }],
		request: async () => answer(400, JSON.stringify(odd)),
	});
	assert.equal(thrown.message, JSON.stringify(odd));
});

// failsWithRefusal checks that a workflow node's run failed as n8n shows a runner error: a
// NodeApiError with the runner's message, and its errorType and suggestion as the description.
async function failsWithRefusal(running) {
	await assert.rejects(running, (error) => {
		assert.equal(error.constructor.name, 'NodeApiError');
		assert.equal(error.message, refused.error);
		assert.equal(error.description, `write_intent_required: ${refused.suggestion}`);
		return true;
	});
}

test('as a workflow node, an error answer fails the node with the runner\'s words', async () => {
	const node = loadNode('UpdateData');
	const ctx = context(node, {
		args: [{ table: 'orders', set: { status: 'paid' }, where: 'id = 1' }],
		request: async () => answer(400, refused),
		asTool: false,
	});
	await failsWithRefusal(node.execute.call(ctx));
	const lenient = context(node, {
		args: [{ table: 'orders', set: { status: 'paid' }, where: 'id = 1' }],
		request: async () => answer(400, refused),
		asTool: false,
		continueOnFail: true,
	});
	const out = await node.execute.call(lenient);
	assert.deepEqual(out[0], [{ json: refused, pairedItem: { item: 0 } }]);
});

test('an unreachable runner fails the node in plain words', async () => {
	const node = loadNode('SelectQuery');
	const ctx = context(node, {
		args: [{ table: 'orders' }],
		request: async () => {
			const error = new Error('connect ECONNREFUSED 127.0.0.1:1');
			error.code = 'ECONNREFUSED';
			throw error;
		},
	});
	await assert.rejects(node.execute.call(ctx), (error) => {
		// The fix is in the message: n8n gives the model only the message of a failed tool run.
		assert.equal(
			error.message,
			'Cannot reach the pgtools runner at http://runner.test:8080 (ECONNREFUSED). Check that pgtools serve is running and that the URL in the pgtools API credential is its address, e.g. http://127.0.0.1:8080.',
		);
		assert.match(error.description, /^Check that pgtools serve is running/);
		return true;
	});
});

test('an answer that is not from pgtools fails the node', async () => {
	const node = loadNode('SelectQuery');
	const ctx = context(node, { args: [{ table: 'orders' }], request: async () => answer(404, '<html>Not Found</html>') });
	await assert.rejects(node.execute.call(ctx), /answered HTTP 404 without a pgtools result/);
});

test('a credential without a URL is reported before any request', async () => {
	const node = loadNode('SelectQuery');
	const ctx = context(node, { args: [{ table: 'orders' }], credentials: { url: '', token: 'x' }, request: ok });
	await assert.rejects(node.execute.call(ctx), /has no valid URL/);
	assert.equal(ctx.calls.length, 0);
});

test('several input items make several calls, each paired with its item', async () => {
	const { calls, items } = await run('DescribeSchema', { args: [{}, { table: 'orders' }, { schema: 'public' }] });
	assert.deepEqual(calls.map((c) => c.options.body), [{}, { table: 'orders' }, { schema: 'public' }]);
	assert.deepEqual(items.map((i) => i.pairedItem), [{ item: 0 }, { item: 1 }, { item: 2 }]);
});

test('Describe Schema sends search, kind, detail, limit and page_token as the model fills them, and leaves out what it does not', async () => {
	const { calls } = await run('DescribeSchema', {
		args: [{ search: 'kayak orders', kind: 'table', detail: 'names', limit: 5 }, { page_token: 'tok' }, { table: 'wide', search: 'vat', limit: 0 }],
	});
	assert.deepEqual(
		calls.map((c) => c.options.body),
		[{ search: 'kayak orders', kind: 'table', detail: 'names', limit: 5 }, { page_token: 'tok' }, { table: 'wide', search: 'vat' }],
	);
});

// The n8n task runner connection: startJob('pgtools', {tool, args, database}, itemIndex) in place
// of the HTTP request; n8n answers {ok: true, result} or {ok: false, error}.
const taskRunner = { connection: 'taskRunner' };
const done = (result) => async () => ({ ok: true, result });

test('with the n8n task runner, a call is a pgtools task: tool, args, database apart; no credential, no HTTP', async () => {
	const session = '9ffcaa13-4488-4720-bcdb-020aab9b510d';
	const { ctx, items } = await run('SelectQuery', {
		pinned: taskRunner,
		args: [
			{ table: 'orders', columns: 'id,total', params: '["paid"]', where: 'status = $1', limit: 1000, session_id: session },
			{ table: 'orders', database: 'analytics' },
		],
		request: async () => assert.fail('no HTTP request with the task runner'),
		startJob: done({ success: true, operation: 'select', rowCount: 0, data: [] }),
	});
	assert.deepEqual(ctx.jobs, [
		{
			type: 'pgtools',
			settings: {
				tool: 'select_query',
				args: { table: 'orders', columns: 'id,total', where: 'status = $1', params: ['paid'], limit: 1000, session_id: session },
				argsText: `{"table":"orders","columns":"id,total","where":"status = $1","params":["paid"],"limit":1000,"session_id":"${session}"}`,
				text_result: true,
				max_response_bytes: 16384,
			},
			itemIndex: 0,
		},
		{
			type: 'pgtools',
			settings: { tool: 'select_query', args: { table: 'orders' }, argsText: '{"table":"orders"}', database: 'analytics', text_result: true, max_response_bytes: 16384 },
			itemIndex: 1,
		},
	]);
	assert.deepEqual(ctx.credentialsRead, [], 'the task runner needs no credential');
	assert.deepEqual(items.map((i) => i.pairedItem), [{ item: 0 }, { item: 1 }]);
});

test('every tool goes by its wire name', async () => {
	for (const { className, tool } of builtInTools()) {
		const { ctx } = await run(className, { pinned: taskRunner, startJob: done({ success: true }) });
		assert.equal(ctx.jobs[0].settings.tool, tool, className);
	}
});

test('the answer is the same JSON over HTTP and through the task runner, success or error', async () => {
	const found = { success: true, operation: 'select', table: 'orders', rowCount: 1, data: [{ id: 1, total: '19.90' }], truncated: false };
	for (const body of [found, refused]) {
		const args = [{ table: 'orders', set: '{"note": "x"}', where: 'id = 1' }];
		const viaHttp = await run('UpdateData', { args, request: async () => answer(body.success ? 200 : 400, body) });
		// pgtools sends a failed call as the task's error: exactly the HTTP error object.
		const viaTask = await run('UpdateData', {
			args,
			pinned: taskRunner,
			startJob: async () => (body.success ? { ok: true, result: body } : { ok: false, error: body }),
		});
		assert.deepEqual(viaTask.items, viaHttp.items);
		assert.deepEqual(viaTask.items[0].json, body);
		assert.deepEqual(viaTask.ctx.jobs[0].settings.args, viaHttp.calls[0].options.body, 'the same arguments');
	}
});

test('as a workflow node, an error answer from the task runner fails the node with the runner\'s words', async () => {
	const node = loadNode('UpdateData');
	const ctx = context(node, {
		args: [{ table: 'orders', set: { status: 'paid' }, where: 'id = 1' }],
		pinned: taskRunner,
		startJob: async () => ({ ok: false, error: refused }),
		asTool: false,
	});
	await failsWithRefusal(node.execute.call(ctx));
});

// TaskRequestTimeoutError is n8n's (packages/cli/src/task-runners/errors): what startJob throws
// when no runner of the task type took the task within N8N_RUNNERS_TASK_REQUEST_TIMEOUT.
class TaskRequestTimeoutError extends Error {
	constructor(elapsedSeconds) {
		super('Task request timed out');
		this.extra = { elapsedSeconds };
		this.description = 'Your Code node task was not matched to a runner within the timeout period…';
	}
}

test('no pgtools runner connected: the task request timeout becomes an error that names the fix', async () => {
	const node = loadNode('SelectQuery');
	const ctx = context(node, {
		args: [{ table: 'orders' }],
		pinned: taskRunner,
		startJob: async () => {
			throw new TaskRequestTimeoutError(60);
		},
	});
	await assert.rejects(node.execute.call(ctx), (error) => {
		assert.equal(error.constructor.name, 'NodeOperationError');
		assert.equal(
			error.message,
			'No pgtools task runner is connected to n8n (waited 60 s). Start one beside n8n: pgtools serve --n8n-broker http://127.0.0.1:5679, with N8N_RUNNERS_AUTH_TOKEN set to the value n8n runs with.',
		);
		assert.match(error.description, /N8N_RUNNERS_TASK_REQUEST_TIMEOUT/);
		assert.match(error.description, /Connection to Runner HTTP API/);
		return true;
	});
	// With "continue on fail" the message becomes the item, as for an unreachable HTTP runner.
	const lenient = context(node, {
		args: [{ table: 'orders' }],
		pinned: taskRunner,
		continueOnFail: true,
		startJob: async () => {
			throw new TaskRequestTimeoutError(5);
		},
	});
	const out = await node.execute.call(lenient);
	assert.match(out[0][0].json.error, /^No pgtools task runner is connected to n8n \(waited 5 s\)\. Start one beside n8n: pgtools serve --n8n-broker/);
});

test('another failure to hand over the task names the fix too, with n8n\'s reason', async () => {
	const node = loadNode('SelectQuery');
	const ctx = context(node, {
		args: [{ table: 'orders' }],
		pinned: taskRunner,
		startJob: async () => {
			throw new Error('the broker is gone');
		},
	});
	await assert.rejects(
		node.execute.call(ctx),
		/^NodeOperationError: n8n could not hand the call to a pgtools task runner \(the broker is gone\)\. Start one beside n8n: pgtools serve --n8n-broker/,
	);
});

test('a task n8n ends without an answer (runner gone, timeout, cancel) fails the node; so does an answer not from pgtools', async () => {
	const node = loadNode('InsertData');
	const lost = context(node, {
		args: [{ table: 'customers', row: '{"name": "Ann"}', autocommit: true }],
		pinned: taskRunner,
		startJob: async () => ({ ok: false, error: new Error('Node execution failed because the task runner disconnected') }),
	});
	await assert.rejects(node.execute.call(lost), (error) => {
		assert.equal(error.message, 'The pgtools task runner did not finish the call: Node execution failed because the task runner disconnected');
		assert.match(error.description, /A write may or may not have been committed/);
		return true;
	});
	for (const result of ['ok', null, { rows: [] }]) {
		const odd = context(node, { args: [{ table: 'customers' }], pinned: taskRunner, startJob: done(result) });
		await assert.rejects(node.execute.call(odd), /answered without a pgtools result/);
	}
});

test('an n8n without task runners (no startJob) is told to use the HTTP connection', async () => {
	const node = loadNode('SelectQuery');
	const ctx = context(node, { args: [{ table: 'orders' }], pinned: taskRunner });
	await assert.rejects(node.execute.call(ctx), (error) => {
		assert.equal(error.message, 'This n8n cannot send tasks to task runners');
		assert.match(error.description, /Set Connection to Runner HTTP API/);
		return true;
	});
});

test('Row Format, a builder option of the tool node, adds format to the call; the runner default sends none', async () => {
	let { calls } = await run('SelectQuery', { args: [{ table: 'orders' }], pinned: { rowFormat: 'columns' } });
	assert.deepEqual(calls[0].options.body, { table: 'orders', format: 'columns' });
	({ calls } = await run('SelectQuery', { args: [{ table: 'orders' }], pinned: { rowFormat: '' } }));
	assert.deepEqual(calls[0].options.body, { table: 'orders' });
	// A tool without rows has no Row Format and never sends one.
	({ calls } = await run('DescribeSchema', { args: [{}], pinned: { rowFormat: 'csv' } }));
	assert.equal(calls[0].options.body.format, undefined);
	// As a workflow node (not a tool) the option does not apply.
	({ calls } = await run('SelectQuery', { args: [{ table: 'orders' }], pinned: { rowFormat: 'csv' }, asTool: false }));
	assert.equal(calls[0].options.body.format, undefined);
});

test('Max Estimated Cost and Max Estimated Rows, builder options of the tool node, travel as the budget headers and task settings', async () => {
	const pinned = { maxEstimatedCost: 2500.5, maxEstimatedRows: 1000 };
	let { calls } = await run('SelectQuery', { args: [{ table: 'orders' }], pinned });
	assert.equal(calls[0].options.headers['X-PgTools-Max-Estimated-Cost'], '2500.5');
	assert.equal(calls[0].options.headers['X-PgTools-Max-Estimated-Rows'], '1000');
	const { ctx } = await run('ExplainQuery', { args: [{ sql: 'select 1' }], pinned: { ...taskRunner, ...pinned }, startJob: done({ success: true }) });
	assert.equal(ctx.jobs[0].settings.max_estimated_cost, 2500.5);
	assert.equal(ctx.jobs[0].settings.max_estimated_rows, 1000);
	// 0 (the default) leaves the runner's budget; a workflow node (not a tool) sends none.
	({ calls } = await run('SelectQuery', { args: [{ table: 'orders' }], pinned: { maxEstimatedCost: 0, maxEstimatedRows: 0 } }));
	assert.equal(calls[0].options.headers['X-PgTools-Max-Estimated-Cost'], undefined);
	assert.equal(calls[0].options.headers['X-PgTools-Max-Estimated-Rows'], undefined);
	({ calls } = await run('SelectQuery', { args: [{ table: 'orders' }], pinned, asTool: false }));
	assert.equal(calls[0].options.headers['X-PgTools-Max-Estimated-Rows'], undefined);
});
