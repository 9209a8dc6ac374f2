// Approvals through the nodes against a real runner and PostgreSQL (pgtools serve on the demo's
// database with policy.require_approval rows_over 100): Delete Data of many rows waits and
// changes nothing; the agent's own credential cannot approve, even holding the approve scope;
// a person's approver credential lists, approves and denies with the Pgtools Approval node; the
// re-call with approval_id commits once, only with the approved effect (120 approved, 121 to
// change: approval_mismatch, nothing changed); a denied or expired request never commits.
//
// It needs the runner's approvals API and configuration (GET/POST /v1/approvals,
// approvals.ttl_seconds, the approve scope). Until this checkout's runner has them, it is
// skipped, visibly; PGTOOLS_BIN runs it against a runner built elsewhere.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { context, loadCredential, loadNode } from '../helpers.mjs';
import { approvalTokens, buildRunner, startApprovalRunner, startDemo } from '../runner.mjs';

let demo;
let runner;
let skip = false;
try {
	const bin = buildRunner();
	demo = await startDemo(bin);
	runner = await startApprovalRunner(bin, demo);
} catch (error) {
	if (process.env.CI) throw error;
	skip = `no runner: ${String(error.message).split('\n')[0]} (make deps installs what is missing)`;
}
after(async () => {
	await runner?.stop();
	await demo?.stop();
});

const credential = loadCredential();

// http is httpRequestWithAuthentication as n8n performs it for a Pgtools API credential with token.
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

// del is Delete Data's call by the model: every row of one batch, committed on its own.
const del = (batch) => ({ table: 'approval_items', where: 'batch = $1', params: `[${batch}]`, autocommit: true });

// deleteData runs Delete Data as the AI Agent does, with the agent's credential (of runner r);
// a failed tool run returns the error object the model reads.
async function deleteData(args, r = runner) {
	const node = loadNode('DeleteData');
	const ctx = context(node, { args: [args], request: http(approvalTokens.agent), credentials: { url: r.url, token: approvalTokens.agent } });
	try {
		return (await node.execute.call(ctx))[0][0].json;
	} catch (error) {
		return JSON.parse(error.message);
	}
}

// approval runs the Pgtools Approval node as a workflow node with the credential of token; a
// refusal returns the runner's error object (the item with On Error: Continue).
async function approval(token, operation, approvalId, r = runner) {
	const node = loadNode('PgtoolsApproval');
	const ctx = context(node, {
		pinned: { operation, approvalId },
		request: http(token),
		credentials: { url: r.url, token },
		asTool: false,
		continueOnFail: true,
	});
	return (await node.execute.call(ctx))[0].map((item) => item.json);
}

function rows(batch, r = runner) {
	return Number(r.sql(`SELECT count(*) FROM approval_items WHERE batch = ${batch}`));
}

function addRows(batch, n, r = runner) {
	r.sql(`INSERT INTO approval_items (batch) SELECT ${batch} FROM generate_series(1, ${n})`);
}

// waits makes the model's delete of batch, which must answer approval_required with nothing
// changed, and returns the request's id.
async function waits(batch, want, r = runner) {
	const answer = await deleteData(del(batch), r);
	assert.equal(answer.errorType, 'approval_required', JSON.stringify(answer));
	assert.equal(rows(batch, r), want, 'the measuring run was rolled back');
	assert.deepEqual(answer.approval.effect.tables, [{ schema: 'public', name: 'approval_items', rows: want }]);
	assert.ok(answer.suggestion.includes(`approval_id: "${answer.approval.id}"`), answer.suggestion);
	return answer.approval.id;
}

describe('approvals through the nodes', { skip }, () => {
	before(() => addRows(1, 120));

	let id;
	test('a delete of 120 rows waits for approval and changes nothing', async () => {
		id = await waits(1, 120);
		assert.match(id, /^apr_[0-9a-f]+$/);
	});

	test("the agent's own credential cannot approve, though its token holds approve", async () => {
		const [refused] = await approval(approvalTokens.agent, 'approve', id);
		assert.equal(refused.errorType, 'not_allowed', JSON.stringify(refused));
		assert.deepEqual(await approval(approvalTokens.agent, 'listPending'), [], 'nor is it shown its own request');
		const [reader] = await approval(approvalTokens.reader, 'listPending');
		assert.equal(reader.errorType, 'not_allowed', 'a token without approve lists nothing');
		assert.equal(rows(1), 120);
	});

	test('the approver sees the request with its effect and arguments', async () => {
		const pending = await approval(approvalTokens.approver, 'listPending');
		const mine = pending.find((a) => a.id === id);
		assert.ok(mine, JSON.stringify(pending));
		assert.equal(mine.principal, 'n8n-agent');
		assert.equal(mine.tool, 'delete_data');
		assert.equal(mine.effect.total, 120);
		assert.equal(mine.arguments.where, 'batch = $1');
		const [got] = await approval(approvalTokens.approver, 'get', id);
		assert.equal(got.status, 'pending');
	});

	test('an approval of 120 rows does not commit when 121 would change', async () => {
		const [approved] = await approval(approvalTokens.approver, 'approve', id);
		assert.equal(approved.status, 'approved', JSON.stringify(approved));
		assert.equal(approved.approver, 'alice');
		addRows(1, 1);
		const answer = await deleteData({ ...del(1), approval_id: id });
		assert.equal(answer.errorType, 'approval_mismatch', JSON.stringify(answer));
		assert.match(answer.error, /120 rows.*121 rows/);
		assert.equal(rows(1), 121, 'rolled back: nothing changed');
		const again = await deleteData({ ...del(1), approval_id: id });
		assert.notEqual(again.success, true, 'the approval is used up');
		assert.equal(rows(1), 121);
	});

	test('an approval commits once, with the approved effect', async () => {
		const second = await waits(1, 121);
		const [approved] = await approval(approvalTokens.approver, 'approve', second);
		assert.equal(approved.status, 'approved');
		const done = await deleteData({ ...del(1), approval_id: second });
		assert.equal(done.success, true, JSON.stringify(done));
		assert.equal(done.rowCount, 121);
		assert.equal(rows(1), 0);
		addRows(1, 121);
		const replay = await deleteData({ ...del(1), approval_id: second });
		assert.notEqual(replay.success, true, 'single use');
		assert.equal(rows(1), 121, 'the replay changed nothing');
		const [used] = await approval(approvalTokens.approver, 'get', second);
		assert.equal(used.status, 'used');
	});

	test('a denied request never commits', async () => {
		addRows(2, 110);
		const denied = await waits(2, 110);
		const [decided] = await approval(approvalTokens.approver, 'deny', denied);
		assert.equal(decided.status, 'denied');
		const answer = await deleteData({ ...del(2), approval_id: denied });
		assert.equal(answer.errorType, 'not_allowed', JSON.stringify(answer));
		assert.equal(rows(2), 110);
		const [late] = await approval(approvalTokens.approver, 'approve', denied);
		assert.equal(late.success, false, 'a decided request is not decided again');
	});

	test('a request nobody decides in time expires and never commits', async () => {
		const short = await startApprovalRunner(buildRunner(), demo, { ttlSeconds: 1 });
		try {
			addRows(3, 105, short);
			const expiring = await waits(3, 105, short);
			await sleep(1500); // past approvals.ttl_seconds: 1
			const [late] = await approval(approvalTokens.approver, 'approve', expiring, short);
			assert.equal(late.success, false, JSON.stringify(late));
			assert.deepEqual(await approval(approvalTokens.approver, 'listPending', undefined, short), []);
			const answer = await deleteData({ ...del(3), approval_id: expiring }, short);
			assert.notEqual(answer.success, true, JSON.stringify(answer));
			assert.equal(rows(3, short), 105);
		} finally {
			await short.stop();
		}
	});
});
