// The example workflows in examples/n8n/ are what scripts/examples.mjs writes, and they wire
// the package's tool nodes the way n8n expects.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { examples } from '../../scripts/examples.mjs';
import { loadNode, nodeFiles, root } from '../helpers.mjs';

test('examples/n8n is up to date with scripts/examples.mjs', () => {
	execFileSync(process.execPath, [join(root, 'n8n-nodes', 'scripts', 'examples.mjs'), '--check'], { stdio: 'pipe' });
});

test('each example attaches every tool node to its agent, with the credential', () => {
	const toolTypes = Object.keys(nodeFiles).map((c) => `n8n-nodes-pgtools.${loadNode(c).description.name}Tool`);
	for (const example of examples) {
		const wf = JSON.parse(readFileSync(join(root, 'examples', 'n8n', example.file), 'utf8'));
		const tools = wf.nodes.filter((n) => n.type.startsWith('n8n-nodes-pgtools.'));
		assert.deepEqual(tools.map((n) => n.type).sort(), [...toolTypes].sort(), example.file);
		for (const node of tools) {
			assert.deepEqual(wf.connections[node.name], { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] });
			assert.equal(node.credentials.pgToolsApi.name, 'pgtools API');
		}
		const model = wf.nodes.find((n) => n.type === '@n8n/n8n-nodes-langchain.lmChatOpenAi');
		assert.equal(model.parameters.responsesApiEnabled, false, 'Chat Completions, not the Responses API');
	}
});
