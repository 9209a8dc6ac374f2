// Act as User: the builder's expression becomes the header X-PgTools-Act-As (HTTP) or the task
// setting subject (task runner) of each item's call, only when it gives a value; a $fromAI()
// in the field, or a value that cannot name a user, fails the node before any call.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { answer, context, loadNode } from '../helpers.mjs';

const ok = async () => answer(200, { success: true, operation: 'select', rowCount: 0, data: [] });
const done = async () => ({ ok: true, result: { success: true, operation: 'select', rowCount: 0, data: [] } });

// run executes Select Query with Act as User evaluating to users[i] for item i (an expression
// over the item, as n8n evaluates it), over HTTP or the task runner.
async function run({ users, connection = 'http', raw = '={{ $json.sessionId }}', asTool = true }) {
	const node = loadNode('SelectQuery');
	const ctx = context(node, {
		args: users.map(() => ({ table: 'notes' })),
		pinned: { connection, actAsUser: (i) => users[i] },
		parameters: { connection, actAsUser: raw },
		request: ok,
		startJob: done,
		asTool,
	});
	let error;
	try {
		await node.execute.call(ctx);
	} catch (e) {
		error = e;
	}
	return { ctx, error, headers: ctx.calls.map((c) => c.options.headers['X-PgTools-Act-As']), subjects: ctx.jobs.map((j) => j.settings.subject) };
}

test('HTTP: the header carries each item\'s user, trimmed; an empty value sends no header at all', async () => {
	const { headers, ctx, error } = await run({ users: ['alice', ' bob ', '', '   ', undefined, null, 42] });
	assert.equal(error, undefined);
	assert.deepEqual(headers, ['alice', 'bob', undefined, undefined, undefined, undefined, '42']);
	for (const call of ctx.calls) {
		if (!('X-PgTools-Act-As' in call.options.headers)) continue;
		assert.equal(typeof call.options.headers['X-PgTools-Act-As'], 'string');
	}
	// No key at all, not an empty header: the runner refuses any act-as header from a token without act_as.
	assert.deepEqual(ctx.calls.map((c) => Object.keys(c.options.headers).includes('X-PgTools-Act-As')), [true, true, false, false, false, false, true]);
	// The user is not an argument: the body is the model's and the builder's arguments only.
	assert.ok(ctx.calls.every((c) => JSON.stringify(c.options.body) === '{"table":"notes"}'));
});

test('a node left as it was (Act as User empty) sends no header and no subject', async () => {
	const node = loadNode('SelectQuery');
	for (const connection of ['http', 'taskRunner']) {
		const ctx = context(node, { args: [{ table: 'notes' }], pinned: { connection }, request: ok, startJob: done });
		await node.execute.call(ctx);
		assert.deepEqual(ctx.calls.map((c) => Object.keys(c.options.headers).filter((h) => /act/i.test(h))), connection === 'http' ? [[]] : []);
		assert.deepEqual(ctx.jobs.map((j) => 'subject' in j.settings), connection === 'http' ? [] : [false]);
	}
});

test('task runner: the setting subject carries each item\'s user; an empty value sends none', async () => {
	const { subjects, ctx, error } = await run({ users: ['alice', '', 'bob', undefined], connection: 'taskRunner' });
	assert.equal(error, undefined);
	assert.deepEqual(subjects, ['alice', undefined, 'bob', undefined]);
	assert.deepEqual(ctx.jobs.map((j) => 'subject' in j.settings), [true, false, true, false]);
	assert.deepEqual(ctx.jobs.map((j) => j.settings.args), [{ table: 'notes' }, { table: 'notes' }, { table: 'notes' }, { table: 'notes' }]);
	assert.deepEqual(ctx.calls, [], 'nothing over HTTP');
});

test('$fromAI() in Act as User fails the node before any call: the model must not choose whom it acts for', async () => {
	for (const connection of ['http', 'taskRunner']) {
		const { error, ctx } = await run({ users: ['alice'], connection, raw: "={{ $fromAI('user', 'the user', 'string') }}" });
		assert.ok(error, connection);
		assert.equal(error.message, 'Act as User must not use $fromAI()');
		assert.match(error.description, /\{\{ \$json\.sessionId \}\}/);
		assert.deepEqual([ctx.calls, ctx.jobs], [[], []]);
	}
});

test('a value that cannot name a user fails the node with the fix and without the value', async () => {
	const cases = [
		[{ id: 7 }, 'http', /^Act as User gives an object, not a user ID$/],
		[['a'], 'taskRunner', /^Act as User gives a list, not a user ID$/],
		['ali\nce', 'taskRunner', /control character/],
		['josé', 'http', /characters an HTTP header cannot carry/],
	];
	for (const [user, connection, message] of cases) {
		const { error, ctx } = await run({ users: [user], connection });
		assert.ok(error, JSON.stringify(user));
		assert.match(error.message, message);
		assert.ok(!error.message.includes('ali') && !error.message.includes('jos'), 'the value is not repeated');
		assert.ok(error.description.length > 0);
		assert.deepEqual([ctx.calls, ctx.jobs], [[], []]);
	}
	// Any text goes as a task setting.
	const { subjects, error } = await run({ users: ['josé'], connection: 'taskRunner' });
	assert.equal(error, undefined);
	assert.deepEqual(subjects, ['josé']);
});
