// The example workflows in examples/n8n/ are what scripts/examples.mjs writes, and they wire
// the package's tool nodes (or n8n's MCP Client Tool) the way n8n expects.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

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
