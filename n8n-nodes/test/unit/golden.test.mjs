// What the model is offered, beyond the schema's words (checked in descriptions.test.mjs): per
// tool, each argument's $fromAI type, whether it is required, and its default. Pinned in
// testdata/tool-arguments.json so a change is reviewed; UPDATE_GOLDEN=1 rewrites the file.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { fromAICall, loadNode, nodeFiles, root, toolParameters } from '../helpers.mjs';

const golden = join(root, 'n8n-nodes', 'test', 'testdata', 'tool-arguments.json');

test('tool arguments as the model sees them match testdata/tool-arguments.json', () => {
	const actual = {};
	for (const className of Object.keys(nodeFiles)) {
		const d = loadNode(className).description;
		actual[d.defaults.name] = Object.fromEntries(
			toolParameters(d).map((p) => {
				const call = fromAICall(p.default);
				const arg = { type: call.type, required: call.defaultValue === undefined };
				if (call.defaultValue !== undefined) arg.default = call.defaultValue;
				return [call.key, arg];
			}),
		);
	}
	const text = `${JSON.stringify(actual, null, '\t')}\n`;
	if (process.env.UPDATE_GOLDEN) writeFileSync(golden, text);
	assert.equal(text, readFileSync(golden, 'utf8'), 'run UPDATE_GOLDEN=1 npm test and review the diff');
});
