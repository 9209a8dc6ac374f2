// The example workflows in examples/n8n/ are what scripts/examples.mjs writes, and they wire
// the package's tool nodes (or n8n's MCP Client Tool) the way n8n expects.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { approvalCredentials, approvalExample } from '../../scripts/approval-example.mjs';
import { examples, mcpNodeName } from '../../scripts/examples.mjs';
import { builtInNodes, loadNode, root } from '../helpers.mjs';

test('examples/n8n is up to date with scripts/examples.mjs', () => {
	execFileSync(process.execPath, [join(root, 'n8n-nodes', 'scripts', 'examples.mjs'), '--check'], { stdio: 'pipe' });
});

test('each example attaches every tool node to its agent, with the credential its connection needs', () => {
	const toolTypes = builtInNodes.map((c) => `n8n-nodes-pgtools.${loadNode(c).description.name}Tool`);
	for (const example of examples) {
		const wf = JSON.parse(readFileSync(join(root, 'examples', 'n8n', example.file), 'utf8'));
		const tools = wf.nodes.filter((n) => n.type.startsWith('n8n-nodes-pgtools.'));
		if (example.connection === 'mcp' || example.connection === 'custom') continue;
		assert.deepEqual(tools.map((n) => n.type).sort(), [...toolTypes].sort(), example.file);
		for (const node of tools) {
			assert.deepEqual(wf.connections[node.name], { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] });
			if (example.connection === 'taskRunner') {
				assert.equal(node.parameters.connection, 'taskRunner', `${example.file}: ${node.name}`);
				assert.equal(node.credentials, undefined, `${example.file}: the task runner needs no credential`);
			} else {
				assert.equal(node.parameters.connection, undefined, `${example.file}: the HTTP connection is the default`);
				assert.equal(node.credentials.pgToolsApi.name, 'pgtools API');
			}
		}
	}
});

test('the MCP example puts n8n\'s MCP Client Tool on /mcp with a Bearer credential, and no pgtools node', () => {
	const mcp = examples.filter((e) => e.connection === 'mcp');
	assert.equal(mcp.length, 1);
	const wf = JSON.parse(readFileSync(join(root, 'examples', 'n8n', mcp[0].file), 'utf8'));
	assert.deepEqual(wf.nodes.filter((n) => n.type.startsWith('n8n-nodes-pgtools.')), []);
	const client = wf.nodes.find((n) => n.type === '@n8n/n8n-nodes-langchain.mcpClientTool');
	assert.equal(client.name, mcpNodeName);
	assert.equal(client.typeVersion, 1.4);
	assert.deepEqual(client.parameters, {
		endpointUrl: 'http://127.0.0.1:8080/mcp',
		serverTransport: 'httpStreamable',
		authentication: 'bearerAuth',
		include: 'all',
		options: {},
	});
	assert.deepEqual(Object.keys(client.credentials), ['httpBearerAuth']);
	assert.deepEqual(wf.connections[client.name], { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] });
});

test('the custom-tool example puts one Custom Tool node per tool of examples/config/custom-tools.json on its agent, and no built-in tool node', () => {
	const custom = examples.filter((e) => e.connection === 'custom');
	assert.equal(custom.length, 1);
	const config = JSON.parse(readFileSync(join(root, 'examples', 'config', 'custom-tools.json'), 'utf8'));
	const wf = JSON.parse(readFileSync(join(root, 'examples', 'n8n', custom[0].file), 'utf8'));
	const { name, version } = loadNode('CustomTool').description;
	const tools = wf.nodes.filter((n) => n.type.startsWith('n8n-nodes-pgtools.'));
	assert.deepEqual(tools.map((n) => n.type), tools.map(() => `n8n-nodes-pgtools.${name}`));
	assert.deepEqual(tools.map((n) => n.parameters.customTool), config.custom_tools.map((t) => t.name));
	for (const node of tools) {
		assert.equal(node.typeVersion, version, node.name);
		assert.deepEqual(Object.keys(node.parameters), ['customTool'], `${node.name}: the HTTP connection is the default`);
		assert.equal(node.credentials.pgToolsApi.name, 'pgtools API');
		assert.deepEqual(wf.connections[node.name], { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] });
	}
});

test('every example uses Chat Completions', () => {
	for (const example of examples) {
		const wf = JSON.parse(readFileSync(join(root, 'examples', 'n8n', example.file), 'utf8'));
		const model = wf.nodes.find((n) => n.type === '@n8n/n8n-nodes-langchain.lmChatOpenAi');
		assert.equal(model.parameters.responsesApiEnabled, false, `${example.file}: Chat Completions, not the Responses API`);
	}
});

describe('the approvals example (a chat agent and a review form)', () => {
	const wf = JSON.parse(readFileSync(join(root, 'examples', 'n8n', approvalExample.file), 'utf8'));
	const byName = Object.fromEntries(wf.nodes.map((n) => [n.name, n]));
	const approvalType = `n8n-nodes-pgtools.${loadNode('PgtoolsApproval').description.name}`;

	test('every connection joins nodes of the workflow', () => {
		for (const [from, outputs] of Object.entries(wf.connections)) {
			assert.ok(byName[from], from);
			for (const targets of Object.values(outputs)) for (const t of targets.flat()) assert.ok(byName[t.node], `${from} → ${t.node}`);
		}
	});

	test('the agent has Delete Data on the agent\'s credential, and no way to decide a request', () => {
		const tools = Object.entries(wf.connections).filter(([, o]) => o.ai_tool).map(([name]) => byName[name]);
		assert.ok(tools.some((n) => n.type === 'n8n-nodes-pgtools.deleteDataTool'));
		for (const n of tools) {
			assert.match(n.type, /^n8n-nodes-pgtools\.\w+Tool$/, n.name);
			assert.deepEqual(n.credentials, { pgToolsApi: approvalCredentials.agent }, n.name);
		}
		const deciders = wf.nodes.filter((n) => n.type === approvalType);
		assert.deepEqual(deciders.map((n) => n.parameters.operation).sort(), ['approve', 'deny', 'listPending']);
		for (const n of deciders) {
			assert.deepEqual(n.credentials, { pgToolsApi: approvalCredentials.approver }, `${n.name}: the approver's credential`);
			assert.equal(wf.connections[n.name]?.ai_tool, undefined, `${n.name} is no tool`);
		}
		assert.notEqual(approvalCredentials.approver.id, approvalCredentials.agent.id);
		assert.match(byName['AI Agent'].parameters.options.systemMessage, /approval_required[^.]*nothing has changed/);
		assert.ok(wf.connections['Simple Memory'].ai_memory, 'the agent remembers the arguments for the re-call');
	});

	test('only a signed-in n8n user opens the review form, and it decides the request it showed', () => {
		assert.equal(byName['Review requests'].parameters.authentication, 'n8nUserAuth');
		for (const name of ['Approve', 'Deny']) assert.equal(byName[name].parameters.approvalId, "={{ $('Oldest request').first().json.id }}");
		assert.deepEqual(wf.connections['Approve?'].main.map((t) => t[0].node), ['Approve', 'Deny']);
	});

	test('the review page shows the request with the model\'s arguments escaped', () => {
		const field = byName.Decide.parameters.formFields.values.find((f) => f.fieldType === 'html');
		const request = {
			id: 'apr_01',
			principal: 'agent',
			tool: 'delete_data',
			database: 'default',
			arguments: { table: 'orders', where: "note = '<b>nothing</b>' or true", params: [], autocommit: true },
			effect: { tables: [{ schema: 'public', name: 'orders', rows: 120 }], total: 120 },
			rules: ['rows_over 100'],
			createdAt: '2026-11-26T09:00:00Z',
			expiresAt: '2026-11-26T09:15:00Z',
		};
		request.argumentsText = JSON.stringify(request.arguments, null, 2);
		// n8n evaluates each {{ }} of an HTML field as an expression; $json is the request.
		const html = field.html.replace(/\{\{([\s\S]+?)\}\}/g, (_, expr) => String(new Function('$json', `return (${expr});`)(request)));
		assert.match(html, /agent asks to run delete_data on database default/);
		assert.match(html, /<b>120<\/b> rows: public\.orders 120\./);
		assert.match(html, /&lt;b&gt;nothing&lt;\/b&gt;/);
		assert.ok(!html.includes('<b>nothing'), 'the model\'s text is no markup');
		assert.ok(!field.html.startsWith('='), 'an HTML field takes no expression marker');
		// n8n's expression sandbox refuses any read of a field named arguments.
		for (const node of wf.nodes) assert.ok(!/\.arguments\b|\[['"]arguments['"]\]/.test(JSON.stringify(node.parameters)), `${node.name} reads no field named arguments`);
	});
});
