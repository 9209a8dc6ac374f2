// Approvals (policy.require_approval) in the package, with the runner replaced by a stub: the
// write tool nodes offer the model approval_id and forward it, an approval_required answer
// reaches the model whole (its suggestion and the request's id), and the Pgtools Approval node
// makes the requests of the runner's approvals API and maps its answers.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { answer, builtInNodes, context, loadNode, modelArguments, require, root, schemaOf } from '../helpers.mjs';

const { approvalOperations } = require(`${root}/dist/n8n-nodes/shared/approvals.js`);

const approvalId = 'apr_0f1e2d3c4b5a69788796a5b4c3d2e1f0';

// required is the runner's approval_required answer to a delete of 120 rows (tools/approvals.go).
const required = {
	success: false,
	operation: 'delete',
	error: 'This delete_data call needs a person\'s approval (rows_over 100): it would change 120 rows (public.orders 120). Approval request apr_0f1e2d3c4b5a69788796a5b4c3d2e1f0 was made; the call ran in a transaction that was rolled back, and nothing changed',
	errorType: 'approval_required',
	suggestion: `Tell the user what waits for approval. Once an approver (another person's token with the approve scope, on the runner's /approvals page or POST /v1/approvals/${approvalId}) approves it, call delete_data again with the same arguments plus approval_id: "${approvalId}", before 2026-11-26T09:15:00Z.`,
	approval: {
		id: approvalId,
		status: 'pending',
		database: 'default',
		tool: 'delete_data',
		digest: 'sha256:4c1a',
		effect: { tables: [{ schema: 'public', name: 'orders', rows: 120 }], total: 120, commands: ['DELETE'] },
		rules: ['rows_over 100'],
		expiresAt: '2026-11-26T09:15:00Z',
	},
};

const mismatch = {
	success: false,
	operation: 'delete',
	error: `Approval ${approvalId} was given for 120 rows (public.orders 120), but the call would now change 121 rows (public.orders 121); it was rolled back, nothing changed, and the approval is used up`,
	errorType: 'approval_mismatch',
	suggestion: 'The data changed since the approval. Call again without approval_id to have the call measured again and a new approval requested.',
	approval: { ...required.approval, status: 'mismatched', measured: { tables: [{ schema: 'public', name: 'orders', rows: 121 }], total: 121 } },
};

const del = { table: 'orders', where: 'total <= $1', params: '[180]', autocommit: true };

// runTool executes a tool node as the AI Agent does; a failed run returns the error n8n hands the model.
async function runTool(className, options) {
	const node = loadNode(className);
	const ctx = context(node, options);
	try {
		return { ctx, items: (await node.execute.call(ctx))[0] };
	} catch (thrown) {
		return { ctx, thrown };
	}
}

describe('the write tool nodes and approval_id', () => {
	test('a node offers the model approval_id exactly when its tool\'s schema has it, as an optional string', () => {
		const offering = [];
		for (const className of builtInNodes) {
			const d = loadNode(className).description;
			const tool = d.defaults.name;
			const call = modelArguments(d).find((c) => c.key === 'approval_id');
			if ('approval_id' in schemaOf(tool).properties) {
				assert.ok(call, `${tool}: approval_id is offered`);
				assert.equal(call.type, 'string', tool);
				assert.equal(call.defaultValue, '', `${tool}: optional, and never sent when left out`);
				assert.match(call.description, /approved request's id/, tool);
				offering.push(tool);
			} else {
				assert.equal(call, undefined, `${tool} has no approval_id`);
			}
		}
		assert.deepEqual(offering.sort(), ['delete_data', 'execute_sql', 'insert_data', 'pg_transaction', 'update_data']);
	});

	for (const [className, args] of [
		['DeleteData', del],
		['UpdateData', { table: 'orders', set: '{"status": "paid"}', where: 'id = 1', autocommit: true }],
		['InsertData', { table: 'customers', row: '{"name": "Ann"}', autocommit: true }],
		['ExecuteSql', { sql: 'delete from orders where total <= 180', mode: 'write', autocommit: true }],
		['AtomicTransaction', { operations: '[{"sql": "delete from orders where id = 1"}]' }],
	]) {
		test(`${className} forwards approval_id over HTTP and the task runner, and sends none when the model gives none`, async () => {
			const ok = async () => answer(200, { success: true });
			const withId = await runTool(className, { args: [{ ...args, approval_id: approvalId }, args], request: ok });
			assert.equal(withId.thrown, undefined);
			assert.equal(withId.ctx.calls[0].options.body.approval_id, approvalId);
			assert.ok(!('approval_id' in withId.ctx.calls[1].options.body), 'no approval_id key without one');
			const viaTask = await runTool(className, {
				args: [{ ...args, approval_id: approvalId }],
				pinned: { connection: 'taskRunner' },
				startJob: async () => ({ ok: true, result: { success: true } }),
			});
			assert.equal(viaTask.ctx.jobs[0].settings.args.approval_id, approvalId);
		});
	}

	for (const [name, body, status] of [
		['approval_required', required, 403],
		['approval_mismatch', mismatch, 409],
	]) {
		test(`as a tool, ${name} reaches the model whole: its suggestion and the request's id`, async () => {
			const text = JSON.stringify(body);
			const http = await runTool('DeleteData', { args: [del], request: async () => answer(status, text) });
			assert.equal(http.thrown?.constructor.name, 'NodeOperationError');
			assert.equal(http.thrown.message, text, 'the runner\'s answer, byte for byte');
			assert.equal(http.thrown.description, `${name}: ${body.suggestion}`);
			assert.equal(JSON.parse(http.thrown.message).approval.id, approvalId);
			const viaTask = await runTool('DeleteData', { args: [del], pinned: { connection: 'taskRunner' }, startJob: async () => ({ ok: false, error: text }) });
			assert.equal(viaTask.thrown?.message, text, 'the same over the task runner');
		});
	}

	test('as a workflow node with continue on fail, approval_required is the item, so a workflow can route it to a review', async () => {
		const { items } = await runTool('DeleteData', { args: [del], request: async () => answer(403, JSON.stringify(required)), asTool: false, continueOnFail: true });
		assert.deepEqual(items, [{ json: required, pairedItem: { item: 0 } }]);
	});

	test('the Custom Tool node forwards approval_id when the runner lists it in the tool\'s schema', async () => {
		const refund = {
			name: 'refund_order',
			description: 'Refund one order.',
			inputSchema: {
				type: 'object',
				properties: { order_id: { type: 'integer' }, autocommit: { type: 'boolean' }, approval_id: { type: 'string' } },
				required: ['order_id'],
				additionalProperties: false,
			},
		};
		const { ctx, thrown } = await runTool('CustomTool', {
			args: [{ order_id: 7, autocommit: true, approval_id: approvalId, toolCallId: 'call_1' }],
			pinned: { customTool: 'refund_order' },
			request: async (options) => (options.method === 'GET' ? { tools: [refund] } : answer(200, { success: true })),
		});
		assert.equal(thrown, undefined);
		const post = ctx.calls.find((c) => c.options.method === 'POST');
		assert.deepEqual(post.options.body, { order_id: 7, autocommit: true, approval_id: approvalId });
	});
});

// approval is one request as GET /v1/approvals/{id} answers it; its arguments hold a bigint.
const approvalText = `{"id":"${approvalId}","status":"pending","principal":"agent","database":"default","tool":"delete_data","arguments":{"table":"orders","where":"id = $1","params":[9007199254740993],"autocommit":true},"effect":{"tables":[{"schema":"public","name":"orders","rows":120}],"total":120,"commands":["DELETE"]},"rules":["rows_over 100"],"createdAt":"2026-11-26T09:00:00Z","expiresAt":"2026-11-26T09:15:00Z"}`;
const parsed = JSON.parse(approvalText.replace('9007199254740993', '"9007199254740993"'));
// approval is the item the node outputs: the request, with its arguments as text too (n8n's
// expressions cannot read a field named arguments).
const approval = { ...parsed, argumentsText: JSON.stringify(parsed.arguments, null, 2) };

const notYours = {
	success: false,
	error: `Approval ${approvalId} was requested with this credential; another person must decide it`,
	errorType: 'not_allowed',
	suggestion: 'Decide it with a token of another person that has the approve scope.',
};

// runApproval executes the Pgtools Approval node as a workflow node with parameters pinned.
async function runApproval(pinned, { request, asTool = false, continueOnFail = false, items = [{}] } = {}) {
	const node = loadNode('PgtoolsApproval');
	const ctx = context(node, { args: items, pinned, request: request ?? (async () => assert.fail('no request expected')), asTool, continueOnFail });
	try {
		return { ctx, items: (await node.execute.call(ctx))[0] };
	} catch (thrown) {
		return { ctx, thrown };
	}
}

describe('the Pgtools Approval node', () => {
	const d = loadNode('PgtoolsApproval').description;

	test('is a workflow node on the pgtools credential, never an AI tool', () => {
		assert.equal(d.displayName, 'Pgtools Approval');
		assert.ok(!d.usableAsTool, 'n8n must not offer it to an AI Agent');
		assert.deepEqual(d.credentials, [{ name: 'pgToolsApi', required: true }]);
		assert.deepEqual(d.inputs, ['main']);
		assert.deepEqual(d.outputs, ['main']);
		const operation = d.properties.find((p) => p.name === 'operation');
		assert.deepEqual(operation.options.map((o) => o.value).sort(), Object.keys(approvalOperations).sort(), 'every operation has its request');
		assert.equal(operation.default, 'listPending');
		assert.ok(!JSON.stringify(d.properties).includes('$fromAI'), 'nothing for a model to fill');
	});

	test('run as a tool anyway, it refuses before any request', async () => {
		const { thrown, ctx } = await runApproval({ operation: 'approve', approvalId }, { asTool: true });
		assert.match(thrown.message, /cannot run as an AI Agent tool/);
		assert.equal(ctx.calls.length, 0);
		assert.deepEqual(ctx.credentialsRead, [], 'not even the credential is read');
	});

	// Every operation in approvalOperations, with the request it must make.
	const requests = {
		listPending: { method: 'GET', url: 'http://runner.test:8080/v1/approvals', body: undefined },
		get: { method: 'GET', url: `http://runner.test:8080/v1/approvals/${approvalId}`, body: undefined },
		approve: { method: 'POST', url: `http://runner.test:8080/v1/approvals/${approvalId}`, body: { decision: 'approve' } },
		deny: { method: 'POST', url: `http://runner.test:8080/v1/approvals/${approvalId}`, body: { decision: 'deny' } },
	};
	test('the test below covers every operation', () => {
		assert.deepEqual(Object.keys(requests).sort(), Object.keys(approvalOperations).sort());
	});
	for (const [operation, want] of Object.entries(requests)) {
		test(`${operation}: ${want.method} ${want.url.replace('http://runner.test:8080', '')} with the credential`, async () => {
			const decided = { approve: 'approved', deny: 'denied' }[operation];
			// The runner's answers: {"success":true,"approvals":[…]} and {"success":true,"approval":{…}}.
			const one = decided ? approvalText.replace('"pending"', `"${decided}"`) : approvalText;
			const reply = operation === 'listPending' ? `{"success":true,"approvals":[${approvalText}]}` : `{"success":true,"approval":${one}}`;
			const { ctx, items, thrown } = await runApproval({ operation, approvalId: `  ${approvalId} ` }, { request: async () => answer(200, reply) });
			assert.equal(thrown, undefined);
			assert.equal(ctx.calls.length, 1);
			const { credentialType, options } = ctx.calls[0];
			assert.equal(credentialType, 'pgToolsApi');
			assert.equal(options.method, want.method);
			assert.equal(options.url, want.url);
			assert.deepEqual(options.body, want.body);
			if (want.body) assert.equal(options.headers['Content-Type'], 'application/json');
			assert.equal(options.encoding, 'text', 'read as text, so no number is rounded');
			assert.equal(options.ignoreHttpStatusErrors, true);
			assert.deepEqual(items, [{ json: decided ? { ...approval, status: decided } : approval, pairedItem: { item: 0 } }]);
			assert.equal(items[0].json.arguments.params[0], '9007199254740993', 'the bigint the approver reads is exact');
			assert.match(items[0].json.argumentsText, /^\{\n {2}"table": "orders",\n {2}"where": "id = \$1",\n {2}"params": \[\n {4}"9007199254740993"\n {2}\],/);
		});
	}

	test('List Pending gives one item per request, none when none waits, and accepts a bare list', async () => {
		const two = `{"success":true,"approvals":[${approvalText},${approvalText.replace(approvalId, 'apr_99')}]}`;
		const many = await runApproval({ operation: 'listPending' }, { items: [{}, {}], request: async () => answer(200, two) });
		assert.deepEqual(many.items.map((i) => [i.json.id, i.pairedItem.item]), [[approvalId, 0], ['apr_99', 0], [approvalId, 1], ['apr_99', 1]]);
		const none = await runApproval({ operation: 'listPending' }, { request: async () => answer(200, '{"success":true,"approvals":[]}') });
		assert.deepEqual(none.items, []);
		const bare = await runApproval({ operation: 'listPending' }, { request: async () => answer(200, `[${approvalText}]`) });
		assert.equal(bare.items[0].json.id, approvalId);
	});

	test('Get and the decisions accept the bare request too', async () => {
		const { items } = await runApproval({ operation: 'get', approvalId }, { request: async () => answer(200, approvalText) });
		assert.deepEqual(items, [{ json: approval, pairedItem: { item: 0 } }]);
	});

	for (const bad of ['', 'apr_', '../tools/delete_data', `${approvalId}/../x`, 'apr_12?decision=approve', 'tok_123']) {
		test(`an approval ID like ${JSON.stringify(bad)} is refused before any request`, async () => {
			const { thrown, ctx } = await runApproval({ operation: 'approve', approvalId: bad });
			assert.match(thrown.message, /is not an approval request's ID/);
			assert.equal(ctx.calls.length, 0);
		});
	}

	test('an unknown operation is refused before any request', async () => {
		const { thrown, ctx } = await runApproval({ operation: 'approveAll', approvalId });
		assert.match(thrown.message, /Unknown operation "approveAll"/);
		assert.equal(ctx.calls.length, 0);
		const proto = await runApproval({ operation: 'toString', approvalId });
		assert.match(proto.thrown.message, /Unknown operation/);
	});

	test('a refusal of the runner fails the node in its words; with continue on fail it is the item', async () => {
		const refuse = async () => answer(403, JSON.stringify(notYours));
		const { thrown } = await runApproval({ operation: 'approve', approvalId }, { request: refuse });
		assert.equal(thrown.constructor.name, 'NodeApiError');
		assert.equal(thrown.message, notYours.error);
		assert.equal(thrown.description, `not_allowed: ${notYours.suggestion}`);
		assert.equal(thrown.httpCode, '403');
		const lenient = await runApproval({ operation: 'approve', approvalId }, { request: refuse, continueOnFail: true });
		assert.deepEqual(lenient.items, [{ json: notYours, pairedItem: { item: 0 } }]);
	});

	for (const [what, status, body] of [
		['a runner without the approvals API (HTML 404)', 404, '<html>Not Found</html>'],
		['an answer that is not an approval', 200, '{"success": true, "rows": []}'],
		['a list holding something else', 200, '{"success": true, "approvals": [{"id": "x"}]}'],
		['a list that is no success', 200, '{"success": false, "approvals": []}'],
		['a request without an id', 200, '{"success": true, "approval": {"status": "pending"}}'],
	]) {
		test(`${what} fails the node`, async () => {
			const { thrown } = await runApproval({ operation: what.includes('list') ? 'listPending' : 'get', approvalId }, { request: async () => answer(status, body) });
			assert.match(thrown.message, new RegExp(`answered HTTP ${status} without a pgtools approval`));
		});
	}

	test('an unreachable runner fails the node with the fix', async () => {
		const { thrown } = await runApproval({ operation: 'listPending' }, {
			request: async () => {
				const error = new Error('connect ECONNREFUSED 127.0.0.1:1');
				error.code = 'ECONNREFUSED';
				throw error;
			},
		});
		assert.match(thrown.message, /^Cannot reach the pgtools runner at http:\/\/runner\.test:8080 \(ECONNREFUSED\)\. Check that pgtools serve is running/);
	});
});
