// The approvals spec of make e2e (run.mjs registers it): in real n8n, with the package installed
// as a community package, an AI Agent's Delete Data of 120 rows waits for approval (nothing
// changed, the model read approval_required with the request's id); a review workflow
// (Pgtools Approval: List Pending, then Approve) on the agent's own credential is refused, on a
// person's approver credential approves; the scripted model calls again with approval_id and
// the rows are gone. Against `pgtools serve` on the demo's database with require_approval
// rows_over 100 (test/runner.mjs startApprovalRunner). The other cases (approval_mismatch at 121
// rows, single use, denial, expiry) run through the same nodes in test/integration/approval.test.mjs.
// Then the review form of examples/n8n/pgtools-approval.json, published in `n8n start`, shows a
// request as the approver reads it and denies it, driven the way its page's script drives it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { approvalCredentials, approvalExample } from '../scripts/approval-example.mjs';
import { workflow } from '../scripts/examples.mjs';
import { root } from '../test/helpers.mjs';
import { approvalTokens, startApprovalRunner } from '../test/runner.mjs';

const agentCredential = { id: 'pgtoolsApiApprAg', name: 'pgtools API (approvals: agent)' };
const approverCredential = { id: 'pgtoolsApiApprOk', name: 'pgtools API (approvals: approver)' };

/** agentExample is the agent workflow as run.mjs's execute takes it (id, prompt). */
const agentExample = { id: 'pgtoolsE2eApprAg', name: 'pgtools e2e: a delete that waits for approval', prompt: 'Delete the items of batch 7.' };

// reviewWorkflow lists the pending requests with credential and approves the oldest: the review
// path of examples/n8n/pgtools-approval.json without its form.
function reviewWorkflow(id, name, credential) {
	const node = (n, nodeName, type, parameters, extra = {}) => ({ id: `5e1c0a7b-${id.slice(-4)}-4000-8000-00000000000${n}`, name: nodeName, type, typeVersion: 1, position: [220 * n, 0], parameters, ...extra });
	return {
		id,
		name,
		nodes: [
			node(0, 'Start', 'n8n-nodes-base.manualTrigger', {}),
			node(1, 'Pending requests', 'n8n-nodes-pgtools.pgtoolsApproval', { operation: 'listPending' }, { credentials: { pgToolsApi: credential }, alwaysOutputData: true }),
			node(2, 'Oldest request', 'n8n-nodes-base.limit', { maxItems: 1 }),
			node(3, 'Approve', 'n8n-nodes-pgtools.pgtoolsApproval', { operation: 'approve', approvalId: '={{ $json.id }}' }, { credentials: { pgToolsApi: credential }, onError: 'continueRegularOutput' }),
		],
		connections: {
			Start: { main: [[{ node: 'Pending requests', type: 'main', index: 0 }]] },
			'Pending requests': { main: [[{ node: 'Oldest request', type: 'main', index: 0 }]] },
			'Oldest request': { main: [[{ node: 'Approve', type: 'main', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
		pinData: {},
		active: false,
	};
}

const review = { id: 'pgtoolsE2eApprRv', name: 'pgtools e2e: approve the oldest request' };
const selfReview = { id: 'pgtoolsE2eApprSf', name: 'pgtools e2e: the agent approves its own request' };

/**
 * startApprovals starts the approvals runner on demo's database and returns it with the
 * credentials and workflows to import, or undefined when the runner has no approvals API.
 */
export async function startApprovals(bin, demo) {
	const runner = await startApprovalRunner(bin, demo);
	const agent = workflow(agentExample);
	for (const n of agent.nodes) if (n.credentials?.pgToolsApi) n.credentials.pgToolsApi = agentCredential;
	return {
		runner,
		credentials: [
			{ ...agentCredential, type: 'pgToolsApi', data: { url: runner.url, token: approvalTokens.agent } },
			{ ...approverCredential, type: 'pgToolsApi', data: { url: runner.url, token: approvalTokens.approver } },
		],
		workflows: [agent, reviewWorkflow(review.id, review.name, approverCredential), reviewWorkflow(selfReview.id, selfReview.name, agentCredential), exampleCopy()],
	};
}

// exampleCopy is examples/n8n/pgtools-approval.json on this runner's credentials, its form open
// to anyone: n8n User Auth signs in through n8n's OAuth2 flow, which a script cannot follow.
function exampleCopy() {
	const wf = JSON.parse(readFileSync(join(root, 'examples', 'n8n', approvalExample.file), 'utf8'));
	for (const n of wf.nodes) {
		if (n.credentials?.pgToolsApi?.id === approvalCredentials.agent.id) n.credentials.pgToolsApi = agentCredential;
		if (n.credentials?.pgToolsApi?.id === approvalCredentials.approver.id) n.credentials.pgToolsApi = approverCredential;
	}
	const trigger = wf.nodes.find((n) => n.type === 'n8n-nodes-base.formTrigger');
	assert.equal(trigger.parameters.authentication, 'n8nUserAuth', 'the example asks for n8n sign-in');
	trigger.parameters.authentication = 'none';
	return wf;
}

// formPage fetches a form page (GET) or submits one (POST fields), and for a submission waits
// until n8n shows the next page, as the form page's script does (polling n8n-execution-status).
async function formPage(url, fields) {
	if (!fields) {
		const r = await fetch(url);
		return { status: r.status, html: await r.text() };
	}
	const body = new FormData();
	for (const [k, v] of Object.entries(fields)) body.append(k, v);
	const r = await fetch(url, { method: 'POST', body });
	const answer = await r.text();
	assert.equal(r.status, 200, answer);
	const next = JSON.parse(answer).formWaitingUrl;
	assert.ok(next, answer);
	const status = new URL(next);
	status.pathname += '/n8n-execution-status';
	for (let i = 0; ; i++) {
		const text = (await (await fetch(status)).text()).trim();
		if (text === 'form-waiting') break;
		assert.ok(i < 120, `the next page never came (status ${text})`);
		await new Promise((resolve) => setTimeout(resolve, 500));
	}
	return { url: next, ...(await formPage(next)) };
}

/**
 * approvalSpec registers the spec. state() gives { approvals } (startApprovals' result) once
 * run.mjs's before has run; execute runs an agent workflow with a model script (run.mjs's);
 * runData runs a workflow with n8n execute and returns its run data by node name.
 */
export function approvalSpec({ state, execute, runData, n8nRun, n8nStart, turn, lastResult, toolCall }) {
	describe('approvals (Delete Data waits, the Pgtools Approval node decides)', () => {
		after(async () => await state().approvals?.runner.stop());
		const rows = () => Number(state().approvals.runner.sql('SELECT count(*) FROM approval_items WHERE batch = 7'));
		const del = { table: 'approval_items', where: 'batch = $1', params: '[7]', autocommit: true };

		test('a delete of 120 rows waits; the agent\'s credential cannot approve, an approver\'s can; the re-call with approval_id deletes them', async () => {
			state().approvals.runner.sql('INSERT INTO approval_items (batch) SELECT 7 FROM generate_series(1, 120)');
			const first = await execute(agentExample, (messages) =>
				turn(messages) === 0 ? toolCall('delete_data', del) : { content: `Deleting these rows waits for approval ${lastResult(messages).approval.id}.` },
			);
			const [waiting] = first.results;
			assert.equal(waiting.errorType, 'approval_required', JSON.stringify(waiting));
			assert.deepEqual(waiting.approval.effect.tables, [{ schema: 'public', name: 'approval_items', rows: 120 }]);
			const id = waiting.approval.id;
			assert.ok(waiting.suggestion.includes(`approval_id: "${id}"`), 'the model is told how to call again');
			assert.equal(first.output, `Deleting these rows waits for approval ${id}.`);
			assert.equal(rows(), 120, 'nothing changed');

			const self = await runData(selfReview.id);
			assert.deepEqual(self['Pending requests'][0].data.main[0].map((i) => i.json), [{}], 'the agent\'s credential is shown none of its requests');

			const approved = await runData(review.id);
			const listed = approved['Pending requests'][0].data.main[0].map((i) => i.json);
			assert.deepEqual(listed.map((a) => [a.id, a.principal, a.tool, a.effect.total]), [[id, 'n8n-agent', 'delete_data', 120]]);
			const decided = approved.Approve[0].data.main[0][0].json;
			assert.equal(decided.status, 'approved', JSON.stringify(decided));
			assert.equal(decided.approver, 'alice');
			assert.equal(rows(), 120, 'approving runs nothing');

			const second = await execute(agentExample, (messages) =>
				turn(messages) === 0 ? toolCall('delete_data', { ...del, approval_id: id }) : { content: `Deleted ${lastResult(messages).rowCount} rows.` },
			);
			assert.equal(second.results[0].success, true, JSON.stringify(second.results[0]));
			assert.equal(second.output, 'Deleted 120 rows.');
			assert.equal(rows(), 0);
		});

		test('the example\'s review form shows a request, its effect and its arguments as text, and denies it', async () => {
			const { runner } = state().approvals;
			runner.sql('INSERT INTO approval_items (batch) SELECT 8 FROM generate_series(1, 110)');
			const made = await fetch(`${runner.url}/v1/tools/delete_data`, {
				method: 'POST',
				headers: { authorization: `Bearer ${approvalTokens.agent}`, 'content-type': 'application/json' },
				body: JSON.stringify({ table: 'approval_items', where: "batch = $1 or $2 = '<b>nothing</b>'", params: [8, 'x'], autocommit: true }),
			}).then((r) => r.json());
			assert.equal(made.errorType, 'approval_required', JSON.stringify(made));
			const id = made.approval.id;
			await n8nRun(['publish:workflow', `--id=${approvalExample.id}`]);
			const server = await n8nStart();
			try {
				const hook = exampleCopy().nodes.find((n) => n.type === 'n8n-nodes-base.formTrigger').webhookId;
				const start = `${server.base}/form/${hook}`;
				// A published workflow's triggers come up a moment after n8n answers.
				for (let i = 0; (await formPage(start)).status === 404; i++) {
					assert.ok(i < 60, 'the review form never came up');
					await new Promise((resolve) => setTimeout(resolve, 1000));
				}
				assert.match((await formPage(start)).html, /pgtools approvals/);
				const decide = await formPage(start, {});
				assert.equal(decide.status, 200, decide.html.slice(0, 500));
				assert.ok(decide.html.includes(`Request ${id}`), 'the oldest pending request');
				assert.ok(decide.html.includes('n8n-agent asks to run delete_data on database default'));
				assert.ok(decide.html.includes('would change <b>110</b> rows: public.approval_items 110'));
				assert.ok(decide.html.includes('&lt;b&gt;nothing&lt;/b&gt;'), 'the model\'s text is shown as text');
				assert.ok(!decide.html.includes('<b>nothing'), 'and never as markup');
				// field-1 is the Decision radio; the page's script sends a radio as a JSON list.
				const done = await formPage(decide.url, { 'field-1': JSON.stringify(['Deny']) });
				assert.match(done.html, new RegExp(`Request ${id} is denied: a call with it is refused`));
			} finally {
				await server.stop();
			}
			const [decided] = await fetch(`${runner.url}/v1/approvals/${id}`, { headers: { authorization: `Bearer ${approvalTokens.approver}` } })
				.then((r) => r.json())
				.then((a) => [a.approval]);
			assert.equal(decided.status, 'denied');
			assert.equal(decided.approver, 'alice', 'decided with the approver credential');
			assert.equal(Number(runner.sql('SELECT count(*) FROM approval_items WHERE batch = 8')), 110);
		});
	});
}
