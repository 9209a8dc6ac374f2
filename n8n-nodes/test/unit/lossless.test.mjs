// No number is corrupted on the way through a node: the model's JSON text reaches the runner as
// written, and the runner's answer reaches n8n with every number JavaScript cannot hold kept as
// a string of its exact digits — over HTTP and through the task runner.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { answer, context, loadNode, require, root } from '../helpers.mjs';

const { parseJson, quoteInexactNumbers, isExactNumber, inexactNumbers } = require(join(root, 'dist', 'n8n-nodes', 'shared', 'json.js'));

test('isExactNumber: at and past ±2^53, long numerics, exponents', () => {
	for (const ok of ['0', '-0', '1', '1.5', '1.50', '15e-1', '0.1', '9007199254740991', '-9007199254740991', '9007199254740992', '1e21', '100000000000000000000', '2.5E-7']) {
		assert.ok(isExactNumber(ok), ok);
	}
	for (const bad of ['9007199254740993', '-9007199254740993', '9007199254740995', '12345678901234567890', '123456789012345678901234567890', '0.1000000000000000055511151231257827', '1e400', '3.14159265358979323846']) {
		assert.ok(!isExactNumber(bad), bad);
	}
});

test('parseJson keeps every number JavaScript cannot hold as its exact digits', () => {
	const text = '{"a": 9007199254740993, "b": [-9007199254740995, 1.5, 2], "c": {"big": 12345678901234567890, "n": 123456789012345678901234567890.123}, "s": "9007199254740993 \\" 1e400", "d": 1e400, "ok": 9007199254740991}';
	assert.deepEqual(parseJson(text), {
		a: '9007199254740993',
		b: ['-9007199254740995', 1.5, 2],
		c: { big: '12345678901234567890', n: '123456789012345678901234567890.123' },
		s: '9007199254740993 " 1e400',
		d: '1e400',
		ok: 9007199254740991,
	});
	const plain = '{"a": [1, 2.5, -3e-2], "b": "x"}';
	assert.equal(quoteInexactNumbers(plain), plain, 'text without such numbers is left as it is');
	assert.throws(() => parseJson('{"a": 1'), SyntaxError);
	assert.throws(() => parseJson('[-]'), SyntaxError);
});

test('inexactNumbers finds numbers JavaScript may already have rounded', () => {
	assert.deepEqual(inexactNumbers({ a: 1, b: [2 ** 53 + 2, 0.1], c: { d: 1.2345678901234567 } }, 'row'), ['row.b[0]', 'row.c.d']);
	assert.deepEqual(inexactNumbers([Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 123.456], 'params'), []);
});

const bigRow = '{"id": 4, "b": 9007199254740995, "doc": {"big": 12345678901234567890}, "n": 123456789012345678901234567890.5}';
const bigAnswer = '{"success":true,"operation":"select","table":"t","rowCount":1,"data":[{"id":"9007199254740995","doc":{"big":12345678901234567890,"neg":-9007199254740993},"n":"123456789012345678901234567890.5"}],"truncated":false}';
const bigItem = {
	success: true,
	operation: 'select',
	table: 't',
	rowCount: 1,
	data: [{ id: '9007199254740995', doc: { big: '12345678901234567890', neg: '-9007199254740993' }, n: '123456789012345678901234567890.5' }],
	truncated: false,
};

for (const [connection, pinned] of [
	['HTTP', {}],
	['task runner', { connection: 'taskRunner' }],
]) {
	test(`${connection}: the model's JSON text is forwarded as written; the answer keeps big numbers`, async () => {
		const node = loadNode('InsertData');
		const ctx = context(node, {
			pinned,
			args: [{ table: 't', row: bigRow, autocommit: true }],
			request: async () => answer(200, bigAnswer),
			// pgtools serve --n8n-broker answers with the JSON text when the settings ask text_result.
			startJob: async (type, settings) => {
				assert.equal(settings.text_result, true);
				return { ok: true, result: bigAnswer };
			},
		});
		const out = await node.execute.call(ctx);
		const sent = connection === 'HTTP' ? ctx.calls[0].options.bodyText : ctx.jobs[0].settings.argsText;
		assert.equal(sent, `{"table":"t","row":${bigRow},"autocommit":true}`, 'byte for byte');
		assert.deepEqual(out[0][0].json, bigItem);
	});

	test(`${connection}: params past 2^53 are bound as written`, async () => {
		const node = loadNode('DeleteData');
		const ctx = context(node, {
			pinned,
			args: [{ table: 't', where: 'id = $1', params: '[9007199254740993]', autocommit: true }],
			request: async () => answer(200, '{"success":true}'),
			startJob: async () => ({ ok: true, result: '{"success":true}' }),
		});
		await node.execute.call(ctx);
		const sent = connection === 'HTTP' ? ctx.calls[0].options.bodyText : ctx.jobs[0].settings.argsText;
		assert.match(sent, /"params":\[9007199254740993\]/);
	});

	test(`${connection}: an error answer reaches the model with its text intact`, async () => {
		const node = loadNode('SelectQuery');
		const error = '{"success":false,"error":"No row has id 9007199254740993","errorType":"invalid_arguments","suggestion":"Use id 9007199254740993."}';
		const ctx = context(node, {
			pinned,
			args: [{ table: 't' }],
			request: async () => answer(400, error),
			startJob: async () => ({ ok: false, error }),
		});
		await assert.rejects(node.execute.call(ctx), (thrown) => thrown.message === error);
	});
}

test('a value n8n already parsed is refused when it holds a number that may have been rounded', async () => {
	const node = loadNode('InsertData');
	const ctx = context(node, {
		// What LangChain hands over for row: {"id": 4, "b": 9007199254740995}: JSON.parse rounded b.
		args: [{ table: 't', row: JSON.parse('{"id": 4, "b": 9007199254740995}'), autocommit: true }],
		request: async () => assert.fail('nothing is sent'),
	});
	await assert.rejects(node.execute.call(ctx), (thrown) => {
		const refused = JSON.parse(thrown.message);
		assert.equal(refused.errorType, 'invalid_arguments');
		assert.match(refused.error, /row\.b: a number JavaScript cannot hold exactly/);
		assert.match(refused.suggestion, /as a JSON string, e\.g\. \{"id": "9007199254740993"\}/);
		return true;
	});
	assert.equal(ctx.calls.length, 0);
});

test('an optional JSON argument the model left out (the omitted marker) is not sent', async () => {
	const node = loadNode('InsertData');
	const ctx = context(node, { args: [{ table: 't', row: '{"a": 1}', autocommit: true }], request: async () => answer(200, '{"success":true}') });
	await node.execute.call(ctx);
	assert.equal(ctx.calls[0].options.bodyText, '{"table":"t","row":{"a": 1},"autocommit":true}', 'rows and on_conflict left out');
});
