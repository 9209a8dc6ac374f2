// The approvals example (examples/n8n/pgtools-approval.json), written by examples.mjs: one
// workflow with two paths. The agent path is a chat with an AI Agent whose Delete Data tool runs
// with the agent's token; a delete the runner's policy.require_approval holds back answers
// approval_required, and the agent tells the user. The review path is a form a signed-in n8n user
// opens: the oldest pending request with its measured effect, Approve or Deny, decided by the
// Pgtools Approval node with an approver's token (another credential than the agent's). Told it
// was approved, the agent calls again with approval_id (the chat memory keeps the arguments).
import { createHash } from 'node:crypto';

/** approvalCredentials: the agent's token (read, write) and a person's approver token (approve), as two credentials. */
export const approvalCredentials = {
	agent: { id: 'pgtoolsApiCred01', name: 'pgtools API' },
	approver: { id: 'pgtoolsApprover1', name: 'pgtools API (approver)' },
	openai: { id: 'openAiApiCred001', name: 'OpenAI' },
};

/** approvalExample names the file and the workflow. */
export const approvalExample = { file: 'pgtools-approval.json', id: 'pgtoolsExApprov1', name: 'pgtools: a person approves large deletes' };

/** approvalSystem is the agent's system message: what to do with approval_required and after an approval. */
export const approvalSystem =
	'You answer questions about a PostgreSQL database and change it when asked, using the pgtools tools. ' +
	'Call describe_schema when you do not know a table. Writes need autocommit: true. When a tool answers success: false, ' +
	'read errorType and suggestion and correct your next call. When the answer is approval_required, nothing has changed: ' +
	'tell the user what waits for approval (approval.id and approval.effect, the rows per table) and that a person must approve it ' +
	'on the review form; do not call again on your own. When the user says it was approved, call the same tool again with ' +
	'exactly the same arguments plus approval_id. When the answer is approval_mismatch, tell the user the data changed ' +
	'and ask whether to request a new approval.';

// requestHtml shows one request on the review form. n8n evaluates the {{ }} in an HTML field
// itself (the field takes no leading =) and strips scripts; every value the model chose (the
// arguments, as the node's argumentsText: n8n's expressions may not read a field named arguments)
// is escaped as well: a where clause must read as text, never as markup that could dress up
// what the approver sees. Names (caller, tool, database, tables) come from the runner and PostgreSQL.
const requestHtml =
	'<h3>{{ $json.principal }} asks to run {{ $json.tool }} on database {{ $json.database }}</h3>\n' +
	'<p>Measured in a rolled-back run, it would change <b>{{ $json.effect.total }}</b> rows: ' +
	"{{ $json.effect.tables.map(t => t.schema + '.' + t.name + ' ' + t.rows).join(', ') }}.</p>\n" +
	"<p>Held back by: {{ $json.rules.join('; ') }}. Requested {{ $json.createdAt }}; expires {{ $json.expiresAt }}.</p>\n" +
	"<p>Arguments:</p>\n<pre>{{ $json.argumentsText.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;') }}</pre>\n" +
	'<p>Approving lets the caller run exactly this once, and only while it changes exactly these rows.</p>';

function ifExists(seed, value) {
	return {
		conditions: {
			options: { caseSensitive: true, leftValue: '', typeValidation: 'strict', version: 2 },
			conditions: [{ id: uuid(seed, 90), leftValue: value, rightValue: '', operator: { type: 'string', operation: 'exists', singleValue: true } }],
			combinator: 'and',
		},
		options: {},
	};
}

function ifEquals(seed, value, text) {
	return {
		conditions: {
			options: { caseSensitive: true, leftValue: '', typeValidation: 'strict', version: 2 },
			conditions: [{ id: uuid(seed, 91), leftValue: value, rightValue: text, operator: { type: 'string', operation: 'equals' } }],
			combinator: 'and',
		},
		options: {},
	};
}

/** approvalWorkflow is the example's workflow JSON. */
export function approvalWorkflow() {
	const seed = approvalExample.id;
	const n = (i, name, type, typeVersion, position, parameters, extra = {}) => ({ id: uuid(seed, i), name, type, typeVersion, position, parameters, ...extra });
	const agentCred = { credentials: { pgToolsApi: approvalCredentials.agent } };
	const approverCred = { credentials: { pgToolsApi: approvalCredentials.approver } };
	const decide = (i, name, operation, position) =>
		n(i, name, 'n8n-nodes-pgtools.pgtoolsApproval', 1, position, { operation, approvalId: "={{ $('Oldest request').first().json.id }}" }, {
			...approverCred,
			// A request that expired or was decided meanwhile: the runner's error is the item, shown on the last page.
			onError: 'continueRegularOutput',
		});
	const nodes = [
		// The agent path.
		// Trigger nodes carry a webhookId, the path of their URL (/form/<webhookId>), as n8n's own exports do.
		n(1, 'When chat message received', '@n8n/n8n-nodes-langchain.chatTrigger', 1.5, [0, 0], { options: {} }, { webhookId: uuid(seed, 101) }),
		n(2, 'AI Agent', '@n8n/n8n-nodes-langchain.agent', 3.1, [260, 0], { options: { systemMessage: approvalSystem } }),
		n(3, 'OpenAI Chat Model', '@n8n/n8n-nodes-langchain.lmChatOpenAi', 1.3, [100, 260], {
			model: { __rl: true, mode: 'list', value: 'gpt-4.1-mini' },
			responsesApiEnabled: false,
			options: {},
		}, { credentials: { openAiApi: approvalCredentials.openai } }),
		n(4, 'Simple Memory', '@n8n/n8n-nodes-langchain.memoryBufferWindow', 1.3, [240, 260], {}),
		n(5, 'describe_schema', 'n8n-nodes-pgtools.describeSchemaTool', 1, [380, 260], {}, agentCred),
		n(6, 'select_query', 'n8n-nodes-pgtools.selectQueryTool', 1, [520, 260], {}, agentCred),
		n(7, 'delete_data', 'n8n-nodes-pgtools.deleteDataTool', 1, [660, 260], {}, agentCred),
		// The review path: a person opens the form, signed in to n8n.
		n(10, 'Review requests', 'n8n-nodes-base.formTrigger', 2.6, [0, 520], {
			authentication: 'n8nUserAuth',
			formTitle: 'pgtools approvals',
			formDescription: 'Shows the oldest request of an agent that waits for a person\'s decision, with what it would change.',
			formFields: { values: [{ fieldType: 'html', elementName: 'intro', html: '<p>Only signed-in n8n users can open this form. Decisions are made with the approver credential of the next node, never with the agent\'s.</p>' }] },
			options: { buttonLabel: 'Show the oldest request' },
		}, { webhookId: uuid(seed, 110) }),
		n(11, 'Pending requests', 'n8n-nodes-pgtools.pgtoolsApproval', 1, [220, 520], { operation: 'listPending' }, { ...approverCred, alwaysOutputData: true }),
		n(12, 'Any request?', 'n8n-nodes-base.if', 2.3, [440, 520], ifExists(seed, '={{ $json.id }}')),
		n(13, 'Oldest request', 'n8n-nodes-base.limit', 1, [660, 440], { maxItems: 1 }),
		n(14, 'Decide', 'n8n-nodes-base.form', 2.5, [880, 440], {
			operation: 'page',
			formFields: {
				values: [
					{ fieldType: 'html', elementName: 'request', html: requestHtml },
					{ fieldLabel: 'Decision', fieldName: 'decision', fieldType: 'radio', fieldOptions: { values: [{ option: 'Approve' }, { option: 'Deny' }] }, requiredField: true },
				],
			},
			options: { formTitle: '={{ "Request " + $json.id }}', buttonLabel: 'Submit decision' },
		}),
		n(15, 'Approve?', 'n8n-nodes-base.if', 2.3, [1100, 440], ifEquals(seed, '={{ $json.decision }}', 'Approve')),
		decide(16, 'Approve', 'approve', [1320, 360]),
		decide(17, 'Deny', 'deny', [1320, 520]),
		n(18, 'Decided', 'n8n-nodes-base.form', 2.5, [1540, 440], {
			operation: 'completion',
			respondWith: 'text',
			completionTitle: '={{ $json.status ? "Request " + $json.status : "Not decided" }}',
			completionMessage:
				'={{ $json.status === "approved" ? "Request " + $json.id + " is approved: the agent may run it once, and only with exactly this effect, before " + $json.expiresAt + ". Tell the user." : $json.status ? "Request " + $json.id + " is " + $json.status + ": a call with it is refused. Tell the user." : $json.error + " " + ($json.suggestion ?? "") }}',
		}),
		n(19, 'Nothing waits', 'n8n-nodes-base.form', 2.5, [660, 620], {
			operation: 'completion',
			respondWith: 'text',
			completionTitle: 'Nothing waits',
			completionMessage: 'No request waits for your decision.',
		}),
	];
	const main = (...targets) => ({ main: targets.map((t) => (t ? [{ node: t, type: 'main', index: 0 }] : [])) });
	const tool = { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] };
	const connections = {
		'When chat message received': main('AI Agent'),
		'OpenAI Chat Model': { ai_languageModel: [[{ node: 'AI Agent', type: 'ai_languageModel', index: 0 }]] },
		'Simple Memory': { ai_memory: [[{ node: 'AI Agent', type: 'ai_memory', index: 0 }]] },
		describe_schema: tool,
		select_query: tool,
		delete_data: tool,
		'Review requests': main('Pending requests'),
		'Pending requests': main('Any request?'),
		'Any request?': main('Oldest request', 'Nothing waits'),
		'Oldest request': main('Decide'),
		Decide: main('Approve?'),
		'Approve?': main('Approve', 'Deny'),
		Approve: main('Decided'),
		Deny: main('Decided'),
	};
	return { id: seed, name: approvalExample.name, nodes, connections, settings: { executionOrder: 'v1' }, pinData: {}, active: false };
}

// uuid makes stable node ids, so regenerating the file changes nothing.
function uuid(seed, i) {
	const hex = createHash('sha256').update(`${seed}/${i}`).digest('hex');
	return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
