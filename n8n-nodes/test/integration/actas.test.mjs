// Act as User against a real runner: a database set up as docs/identity.md's "Database setup for agent
// roles" prescribes (an authenticator login role, a NOLOGIN agent role, set_config and plpgsql
// taken from PUBLIC, and a table under row-level security keyed on the claims' sub), served by
// `pgtools serve` with a token that has act_as and that role, and one without act_as
// (startActAsRunner). The PostgreSQL is pgtools demo's throwaway cluster; psql checks it as the
// superuser.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';

import { context, loadCredential, loadNode } from '../helpers.mjs';
import { actAsTokens, buildRunner, startActAsRunner, startDemo } from '../runner.mjs';

let demo;
let skip = false;
let bin;
try {
	bin = buildRunner();
	demo = await startDemo(bin);
	execFileSync('psql', ['--version'], { stdio: 'ignore' });
} catch (error) {
	if (process.env.CI) throw error;
	skip = `no runner or psql: ${String(error.message).split('\n')[0]} (make deps installs what is missing)`;
}
after(async () => await demo?.stop());

const tokens = actAsTokens;
const credential = loadCredential();

let runner;
before(async () => {
	if (!skip) runner = await startActAsRunner(bin, demo);
});
after(async () => await runner?.stop());

// http is httpRequestWithAuthentication as n8n performs it for the pgtools API credential.
function http(token) {
	return async (options) => {
		const headers = { ...options.headers };
		for (const [name, value] of Object.entries(credential.authenticate.properties.headers)) {
			headers[name] = value.replace(/^=/, '').replace('{{$credentials.token}}', token);
		}
		const response = await fetch(options.url, { method: options.method, headers, body: options.body });
		return { statusCode: response.status, body: await response.text(), headers: {} };
	};
}

// run executes a node as an agent tool, Act as User evaluating to users[i] for item i, and
// returns each item's answer; a failed tool run gives the error object the model reads, marked.
async function run(className, users, args, token = tokens.actAs) {
	const node = loadNode(className);
	const ctx = context(node, {
		args: users.map(() => args),
		pinned: { actAsUser: (i) => users[i] },
		parameters: { actAsUser: '={{ $json.sessionId }}' },
		credentials: { url: runner.url, token },
		request: http(token),
	});
	try {
		return (await node.execute.call(ctx))[0].map((item) => item.json);
	} catch (error) {
		const answer = JSON.parse(error.message);
		return [{ ...answer, failed: true }];
	}
}

const owners = (r) => r.data.map((row) => row.owner).sort();
// calls lists the runner's tool requests as [principal, role, error type], once its access log
// shows n of them (the line is written after the answer, so it may come a moment later).
async function calls(n = 0) {
	const seen = () =>
		runner.logs.filter((l) => l.message === 'request' && l.path.startsWith('/v1/tools/')).map((l) => [l.principal, l.role, l.error_type ?? 'ok']);
	for (let waited = 0; seen().length < n && waited < 3000; waited += 50) await new Promise((r) => setTimeout(r, 50));
	return seen();
}

describe('Act as User against a real runner and row-level security', { skip }, () => {
	test('two users, one node run: each item reads only its user\'s rows', async () => {
		const [alice, bob] = await run('SelectQuery', ['alice', 'bob'], { table: 'notes', order_by: 'id' });
		assert.equal(alice.success, true, JSON.stringify(alice));
		assert.deepEqual(owners(alice), ['alice', 'alice']);
		assert.deepEqual(owners(bob), ['bob']);
		assert.deepEqual(
			(await calls(2)).slice(-2),
			[
				['n8n:alice', 'n8n_tenant', 'ok'],
				['n8n:bob', 'n8n_tenant', 'ok'],
			],
			'the runner acted as each user, with the token\'s role',
		);
	});

	test('writes land as the user and reach only the user\'s rows', async () => {
		const [inserted] = await run('InsertData', ['bob'], { table: 'notes', row: '{"body": "b2"}', returning: 'owner', autocommit: true });
		assert.equal(inserted.success, true, JSON.stringify(inserted));
		assert.equal(inserted.data[0].owner, 'bob', 'the owner column took the claims\' sub');
		// where true: every row the model could name, and RLS keeps it to alice's.
		const [updated] = await run('UpdateData', ['alice'], { table: 'notes', set: '{"body": "seen"}', where: 'true', autocommit: true });
		assert.equal(updated.success, true, JSON.stringify(updated));
		assert.equal(updated.rowCount, 2);
		assert.equal(runner.sql("SELECT string_agg(owner || '=' || body, ',' ORDER BY id) FROM notes"), 'alice=seen,alice=seen,bob=b1,bob=b2');
		// A row for someone else is refused by the policy's WITH CHECK, and nothing lands.
		const [forged] = await run('InsertData', ['bob'], { table: 'notes', row: '{"owner": "alice", "body": "forged"}', autocommit: true });
		assert.equal(forged.failed, true);
		assert.equal(forged.success, false);
		assert.equal(runner.sql("SELECT count(*) FROM notes WHERE body = 'forged'"), '0');
	});

	test('Act as User left empty: the token\'s own identity, which row-level security shows nothing', async () => {
		const [r] = await run('SelectQuery', [''], { table: 'notes' });
		assert.equal(r.success, true, JSON.stringify(r));
		assert.equal(r.rowCount, 0);
		assert.deepEqual((await calls(6)).at(-1), ['n8n', 'n8n_tenant', 'ok']);
	});

	test('a token without act_as: not_allowed as a failed tool run, nothing run', async () => {
		const [r] = await run('DeleteData', ['alice'], { table: 'notes', where: 'true', autocommit: true }, tokens.plain);
		assert.equal(r.failed, true, 'the tool run failed');
		assert.equal(r.errorType, 'not_allowed', JSON.stringify(r));
		assert.match(r.suggestion, /act_as/);
		assert.equal(runner.sql('SELECT count(*) FROM notes'), '4');
		assert.equal((await calls(7)).at(-1)[2], 'not_allowed', 'refused before it ran');
	});
});
