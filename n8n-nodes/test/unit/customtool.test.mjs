// The Custom Tool node with the runner replaced by a stub: the picker offers exactly the
// operator-defined tools, the model is offered the runner's schema with its types, and a call
// forwards the model's arguments (and nothing n8n added) over HTTP or the task broker.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { answer, context, loadNode } from '../helpers.mjs';

// listing is GET /v1/tools as a runner with two built-ins and two custom tools serves it.
const ordersByStatus = {
	name: 'orders_by_status',
	description: 'Orders with one status, newest first.',
	inputSchema: {
		type: 'object',
		properties: {
			status: { type: 'string', enum: ['pending', 'paid', 'shipped', 'cancelled'], description: 'The status.' },
			customer_ids: { type: 'array', items: { type: 'integer' } },
			limit: { type: 'integer', minimum: 1, maximum: 50, default: 10 },
			session_id: { type: 'string' },
		},
		required: ['status'],
		additionalProperties: false,
	},
	readOnlyHint: true,
	destructiveHint: false,
};
const cancelOrder = {
	name: 'cancel_order',
	description: 'Cancel one pending order.',
	inputSchema: {
		type: 'object',
		properties: { order_id: { type: 'integer', minimum: 1 }, autocommit: { type: 'boolean' } },
		required: ['order_id'],
		additionalProperties: false,
	},
	readOnlyHint: false,
	destructiveHint: true,
};
const listing = {
	tools: [
		{ name: 'select_query', description: 'Read rows.', inputSchema: { type: 'object', properties: {} }, readOnlyHint: true },
		ordersByStatus,
		{ name: 'insert_data', description: 'Insert rows.', inputSchema: { type: 'object', properties: {} } },
		cancelOrder,
	],
};

// runner answers GET /v1/tools with listing and every POST with success.
function runner(list = listing) {
	return async (options) => (options.method === 'GET' ? list : answer(200, { success: true, rows: [] }));
}

function setup(options) {
	const node = loadNode('CustomTool');
	const ctx = context(node, { request: runner(), ...options });
	return { node, ctx };
}

test('the picker offers exactly the custom tools of the token, read or write, from GET /v1/tools', async () => {
	const { node, ctx } = setup({});
	const options = await node.methods.loadOptions.getCustomTools.call(ctx);
	assert.deepEqual(
		options.map((o) => o.value),
		['cancel_order', 'orders_by_status'],
	);
	assert.equal(options[1].description, 'Read: Orders with one status, newest first.');
	assert.equal(options[0].description, 'Write: Cancel one pending order.');
	assert.equal(ctx.calls[0].options.method, 'GET');
	assert.equal(ctx.calls[0].options.url, 'http://runner.test:8080/v1/tools');
	assert.equal(ctx.calls[0].credentialType, 'pgToolsApi');
});

test('the model is offered the runner\'s description and JSON Schema: types, required, enum, bounds', async () => {
	const { node, ctx } = setup({ pinned: { customTool: 'orders_by_status' } });
	const { response } = await node.supplyData.call(ctx, 0);
	assert.equal(response.name, 'orders_by_status');
	assert.equal(response.description, 'Orders with one status, newest first.');
	assert.deepEqual(response.schema, ordersByStatus.inputSchema);
	assert.deepEqual(response.schema.required, ['status']);
	assert.deepEqual(response.schema.properties.status.enum, ['pending', 'paid', 'shipped', 'cancelled']);
	assert.deepEqual(response.schema.properties.customer_ids, { type: 'array', items: { type: 'integer' } });
	assert.equal(response.schema.properties.limit.type, 'integer');
	// A description override replaces the runner's words, not the schema.
	const { ctx: ctx2 } = setup({ pinned: { customTool: 'orders_by_status', toolDescription: 'Look up orders.' } });
	assert.equal((await node.supplyData.call(ctx2, 0)).response.description, 'Look up orders.');
});

test('a call forwards the schema\'s keys as the model gave them, not n8n\'s own keys (HTTP)', async () => {
	const args = [{ status: 'paid', customer_ids: [3, 5], limit: 2, toolCallId: 'call_1', tool: 'x' }];
	const { node, ctx } = setup({ args, pinned: { customTool: 'orders_by_status' } });
	const out = await node.execute.call(ctx);
	assert.deepEqual(out[0][0].json, { success: true, rows: [] });
	const post = ctx.calls.find((c) => c.options.method === 'POST');
	assert.equal(post.options.url, 'http://runner.test:8080/v1/tools/orders_by_status');
	assert.equal(post.options.bodyText, '{"status":"paid","customer_ids":[3,5],"limit":2}');
});

test('with the task runner connection the call is a pgtools task; the schema still comes through the credential', async () => {
	const { node, ctx } = setup({
		args: [{ order_id: 7, autocommit: true, toolCallId: 'c' }],
		pinned: { customTool: 'cancel_order', connection: 'taskRunner', actAsUser: 'alice' },
		startJob: async () => ({ ok: true, result: '{"success":true,"rows_affected":1}' }),
	});
	const out = await node.execute.call(ctx);
	assert.deepEqual(out[0][0].json, { success: true, rows_affected: 1 });
	assert.equal(ctx.jobs.length, 1);
	assert.equal(ctx.jobs[0].type, 'pgtools');
	assert.equal(ctx.jobs[0].settings.tool, 'cancel_order');
	assert.equal(ctx.jobs[0].settings.argsText, '{"order_id":7,"autocommit":true}');
	assert.equal(ctx.jobs[0].settings.subject, 'alice');
	assert.deepEqual(ctx.calls.map((c) => c.options.method), ['GET']);
});

test('a number n8n already rounded is refused with the fix, never sent', async () => {
	const { node, ctx } = setup({ args: [{ order_id: 9007199254740993 }], pinned: { customTool: 'cancel_order' } });
	await assert.rejects(node.execute.call(ctx), (error) => {
		const result = JSON.parse(error.message);
		assert.equal(result.errorType, 'invalid_arguments');
		assert.match(result.error, /order_id: a number JavaScript cannot hold exactly/);
		assert.doesNotMatch(result.error, /9007199254740/);
		return true;
	});
	assert.deepEqual(ctx.calls.map((c) => c.options.method), ['GET']);
});

test('a tool the runner no longer serves (or a built-in name) fails with the fix, before any call', async () => {
	for (const name of ['gone_tool', 'select_query']) {
		const { node, ctx } = setup({ pinned: { customTool: name } });
		await assert.rejects(node.supplyData.call(ctx, 0), (error) => {
			assert.match(error.message, new RegExp(`serves no custom tool "${name}" to this token \\(its custom tools: orders_by_status, cancel_order\\)`));
			assert.match(error.description, /custom_tools/);
			return true;
		});
		assert.deepEqual(ctx.calls.map((c) => c.options.method), ['GET']);
	}
});

test('a server that is not a pgtools runner fails the picker with the fix', async () => {
	const { node, ctx } = setup({ request: async () => '<html>' });
	await assert.rejects(node.methods.loadOptions.getCustomTools.call(ctx), /did not answer GET \/v1\/tools like a pgtools runner/);
});
