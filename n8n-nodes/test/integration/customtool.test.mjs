// The Custom Tool node against a real runner with custom_tools (pgtools serve on the demo's
// PostgreSQL): the picker lists the operator's tools, the model is offered their schemas, a read
// and a write run with their values bound, and a mistake comes back in the runner's words.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';

import { context, loadCredential, loadNode } from '../helpers.mjs';
import { buildRunner, startCustomToolsRunner, startDemo } from '../runner.mjs';

let demo;
let runner;
let skip = false;
try {
	const bin = buildRunner();
	demo = await startDemo(bin);
	runner = await startCustomToolsRunner(bin, demo);
} catch (error) {
	if (process.env.CI) throw error;
	skip = `no runner: ${String(error.message).split('\n')[0]} (make deps installs what is missing)`;
}
after(async () => {
	await runner?.stop();
	await demo?.stop();
});

const credential = loadCredential();

// http is httpRequestWithAuthentication as n8n performs it for the pgtools API credential.
async function http(options) {
	const headers = { ...options.headers };
	for (const [name, value] of Object.entries(credential.authenticate.properties.headers)) {
		headers[name] = value.replace(/^=/, '').replace('{{$credentials.token}}', runner.token);
	}
	const response = await fetch(options.url, { method: options.method, headers, body: options.body });
	const text = await response.text();
	if (options.json) return JSON.parse(text);
	return { statusCode: response.status, body: text, headers: {} };
}

function setup(tool, args) {
	const node = loadNode('CustomTool');
	const ctx = context(node, {
		args,
		pinned: { customTool: tool },
		request: http,
		credentials: { url: runner.url, token: runner.token },
	});
	return { node, ctx };
}

// run executes the node as the AI Agent does; a failed tool run returns the runner's error object.
async function run(tool, args) {
	const { node, ctx } = setup(tool, [args]);
	try {
		return (await node.execute.call(ctx))[0][0].json;
	} catch (error) {
		return JSON.parse(error.message);
	}
}

describe('Custom Tool against a runner with custom_tools', { skip }, () => {
	test('the picker lists the two custom tools and the model gets their typed schemas', async () => {
		const { node, ctx } = setup('orders_by_status');
		const options = await node.methods.loadOptions.getCustomTools.call(ctx);
		assert.deepEqual(options.map((o) => o.value), ['cancel_order', 'orders_by_status']);
		const { response } = await node.supplyData.call(ctx, 0);
		const p = response.schema.properties;
		assert.deepEqual(p.status.enum, ['pending', 'paid', 'shipped', 'cancelled']);
		assert.equal(p.status.type, 'string');
		assert.deepEqual(p.customer_ids, { type: 'array', items: { type: 'integer' }, description: 'Customer ids.' });
		assert.equal(p.limit.type, 'integer');
		assert.deepEqual([...response.schema.required].sort(), ['customer_ids', 'status']);
		const write = await node.supplyData.call(setup('cancel_order').ctx, 0);
		assert.equal(write.response.schema.properties.autocommit.type, 'boolean', 'the runner adds the write intent');
	});

	test('a read binds the enum, the array and the integer', async () => {
		const [row] = runner.sql("SELECT id || ',' || customer_id FROM orders WHERE status = 'paid' ORDER BY id LIMIT 1").split('\n');
		const [, customer] = row.split(',').map(Number);
		const result = await run('orders_by_status', { status: 'paid', customer_ids: [customer], limit: 50, toolCallId: 'call_1' });
		assert.equal(result.success, true, JSON.stringify(result));
		const truth = runner.sql(`SELECT count(*) FROM orders WHERE status = 'paid' AND customer_id = ${customer}`);
		assert.equal(result.data.length, Math.min(50, Number(truth)));
		assert.ok(result.data.every((o) => o.status === 'paid' && Number(o.customer_id) === customer));
	});

	test('a write without intent is refused; with autocommit its values are bound, not spliced', async () => {
		const id = Number(runner.sql("SELECT id FROM orders WHERE status = 'pending' ORDER BY id LIMIT 1"));
		const reason = "'; DROP TABLE orders; --";
		const refused = await run('cancel_order', { order_id: id, reason });
		assert.equal(refused.errorType, 'write_intent_required', JSON.stringify(refused));
		assert.equal(runner.sql(`SELECT status FROM orders WHERE id = ${id}`), 'pending');
		const done = await run('cancel_order', { order_id: id, reason, autocommit: true });
		assert.equal(done.success, true, JSON.stringify(done));
		assert.equal(runner.sql(`SELECT status || '|' || note FROM orders WHERE id = ${id}`), `cancelled|${reason}`);
	});

	test('a wrong value comes back as invalid_arguments with the runner\'s suggestion', async () => {
		const result = await run('orders_by_status', { status: 'lost', customer_ids: [1] });
		assert.equal(result.errorType, 'invalid_arguments', JSON.stringify(result));
		assert.match(result.suggestion, /./);
	});
});
