// What the model is offered, beyond the schema's words (checked in descriptions.test.mjs): per
// tool, each argument's $fromAI type, whether it is required, and its default — found in every
// node parameter as n8n finds them, with Act as User set to an expression as a builder sets it,
// so the act-as subject can never slip into the tool schema unseen. notToolArguments lists the
// node parameters that are the builder's alone (the same on every node). Pinned in
// testdata/tool-arguments.json so a change is reviewed; UPDATE_GOLDEN=1 rewrites the file.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { builtInNodes, loadNode, modelArguments, root } from '../helpers.mjs';

const golden = join(root, 'n8n-nodes', 'test', 'testdata', 'tool-arguments.json');

test('tool arguments as the model sees them match testdata/tool-arguments.json', () => {
	const actual = {};
	const builderOnly = new Set();
	for (const className of builtInNodes) {
		const d = loadNode(className).description;
		const calls = modelArguments(d, { actAsUser: '={{ $json.sessionId }}' });
		actual[d.defaults.name] = Object.fromEntries(
			calls.map((call) => {
				const arg = { type: call.type, required: call.defaultValue === undefined };
				if (call.defaultValue !== undefined) arg.default = call.defaultValue;
				return [call.key, arg];
			}),
		);
		for (const p of d.properties) {
			if (p.type !== 'notice' && !String(p.default).includes('$fromAI(')) builderOnly.add(p.name);
		}
	}
	actual.notToolArguments = [...builderOnly];
	const text = `${JSON.stringify(actual, null, '\t')}\n`;
	if (process.env.UPDATE_GOLDEN) writeFileSync(golden, text);
	assert.equal(text, readFileSync(golden, 'utf8'), 'run UPDATE_GOLDEN=1 npm test and review the diff');
});
