// What n8n and the model read from the package: node descriptions, parameters and their
// $fromAI() defaults (parsed with n8n's own parser), the credential, and the package layout.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';

import { builtInTools } from '../../scripts/generate.mjs';
import { fromAICall, hiddenInNodes, loadCredential, loadNode, modelArguments, nodeFiles, otherNodes, pkg, require, root, schemaOf, workflow } from '../helpers.mjs';

const { z } = require(require.resolve('zod', { paths: [dirname(require.resolve('n8n-workflow'))] }));

// The tool nodes the package must have: one per schemas/ file, named from its x-pgtools.
const expected = Object.fromEntries(builtInTools().map((t) => [t.className, { tool: t.tool, displayName: t.displayName }]));

const connectionParams = ['connection', 'taskRunnerNotice'];

test('package.json registers one node per tool, the Custom Tool and Approval nodes and the credential, all built', () => {
	assert.deepEqual(Object.keys(nodeFiles).sort(), [...Object.keys(expected), ...otherNodes].sort());
	// Every node folder is registered: n8n loads only what package.json lists.
	const folders = readdirSync(join(root, 'n8n-nodes', 'nodes'), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
	assert.deepEqual(folders.sort(), Object.keys(nodeFiles).sort());
	for (const file of [...pkg.n8n.nodes, ...pkg.n8n.credentials]) {
		assert.ok(existsSync(join(root, file)), `${file} is built`);
	}
	assert.equal(pkg.n8n.n8nNodesApiVersion, 1);
	assert.ok(pkg.keywords.includes('n8n-community-node-package'));
	assert.equal(pkg.dependencies, undefined, 'no runtime dependencies');
	assert.deepEqual(pkg.peerDependencies, { 'n8n-workflow': '*' });
	// The build output, and the picture the package README shows.
	assert.deepEqual(pkg.files, ['dist', 'n8n-nodes/docs/workflow.png']);
});

const agentParams = ['toolDescription', 'responseSizeLimit', 'maxEstimatedCost', 'maxEstimatedRows', 'rowFormat'];

// actAsParams are the builder's identity settings: never a tool argument.
const actAsParams = ['actAsUser'];

for (const [className, want] of Object.entries(expected)) {
	describe(className, () => {
		const node = loadNode(className);
		const d = node.description;
		const schema = schemaOf(want.tool);
		const keys = Object.keys(schema.properties).filter((k) => !hiddenInNodes(want.tool).includes(k));
		// The Connection choice and its notice come first; the tool's arguments follow.
		const args = d.properties.filter((p) => ![...connectionParams, ...actAsParams, ...agentParams].includes(p.name));

		test('is an AI tool with the schema description and the pgtools API credential', () => {
			assert.equal(d.displayName, want.displayName);
			assert.equal(d.usableAsTool, true);
			assert.equal(d.description, schema.description);
			assert.equal(d.defaults.name, want.tool, 'the default node name is the tool name the model sees');
			assert.deepEqual(d.credentials, [
				{ name: 'pgToolsApi', required: true, displayOptions: { show: { connection: ['http'] } } },
			]);
			assert.deepEqual(d.inputs, ['main']);
			assert.deepEqual(d.outputs, ['main']);
			assert.equal(typeof node.execute, 'function');
			const dir = dirname(nodeFiles[className]);
			for (const icon of [d.icon.light, d.icon.dark]) {
				assert.ok(existsSync(join(dir, icon.replace(/^file:/, ''))), `${icon} exists`);
			}
			const codex = JSON.parse(readFileSync(join(dir, `${className}.node.json`), 'utf8'));
			assert.equal(codex.node, `n8n-nodes-pgtools.${d.name}`);
		});

		test('starts with the Connection choice: the runner HTTP API by default, or the n8n task runner', () => {
			assert.deepEqual(d.properties.slice(0, connectionParams.length).map((p) => p.name), connectionParams);
			const [connection, notice] = d.properties;
			assert.equal(connection.type, 'options');
			assert.equal(connection.default, 'http', 'existing workflows keep the HTTP connection');
			assert.equal(connection.noDataExpression, true);
			assert.deepEqual(
				connection.options.map((o) => [o.name, o.value]),
				[
					['Runner HTTP API', 'http'],
					['n8n Task Runner', 'taskRunner'],
				],
			);
			assert.equal(notice.type, 'notice');
			assert.deepEqual(notice.displayOptions, { show: { connection: ['taskRunner'] } });
			assert.match(notice.displayName, /pgtools serve --n8n-broker http:\/\/127\.0\.0\.1:5679/);
			assert.match(notice.displayName, /N8N_RUNNERS_AUTH_TOKEN/);
			// n8n asks for the credentials whose displayOptions match the node's parameters (with
			// defaults filled in, as the editor does): a node saved without Connection keeps it.
			const active = (parameters) => {
				const n = { id: 'x', name: 'x', type: `n8n-nodes-pgtools.${d.name}Tool`, typeVersion: 1, position: [0, 0], parameters };
				n.parameters = workflow.NodeHelpers.getNodeParameters(d.properties, parameters, true, false, n, d);
				return [...workflow.NodeHelpers.getActiveCredentialTypes(n, d)];
			};
			assert.deepEqual(active({}), ['pgToolsApi']);
			assert.deepEqual(active({ connection: 'http' }), ['pgToolsApi']);
			assert.deepEqual(active({ connection: 'taskRunner' }), []);
		});

		test('has Act as User, the builder\'s field for whom the calls are: empty by default, never offered to the model', () => {
			const actAs = d.properties.find((p) => p.name === 'actAsUser');
			assert.equal(d.properties.indexOf(actAs), connectionParams.length, 'right after the Connection choice');
			assert.equal(actAs.displayName, 'Act as User');
			assert.equal(actAs.type, 'string');
			assert.equal(actAs.default, '', 'empty: the token\'s own identity, no header');
			assert.equal(actAs.displayOptions, undefined, 'on both connections, as a tool and as a workflow node');
			assert.ok(!actAs.noDataExpression, 'an expression such as {{ $json.sessionId }}');
			assert.match(actAs.placeholder, /\{\{ \$json\.sessionId \}\}/);
			// The tool schema n8n builds from every parameter: the same keys whether Act as User is
			// empty or an expression over the workflow's data; a $fromAI() there would add one.
			const keysOf = (parameters) => modelArguments(d, parameters).map((c) => c.key);
			const plain = keysOf({});
			assert.deepEqual(plain, args.map((p) => fromAICall(p.default).key));
			assert.deepEqual(keysOf({ actAsUser: '={{ $json.sessionId }}' }), plain);
			assert.deepEqual(keysOf({ actAsUser: 'customer-42' }), plain);
			assert.ok(!plain.some((k) => /act_?as|user|subject|^sub$/i.test(k)), `no act-as key among ${plain}`);
			assert.deepEqual(keysOf({ actAsUser: "={{ $fromAI('user', 'whom to act for', 'string') }}" }), ['user', ...plain], 'what the node refuses at run time');
		});

		test('has one parameter per schema argument, AI-filled with the schema words', () => {
			assert.deepEqual(
				args.map((p) => fromAICall(p.default).key),
				keys,
			);
			for (const p of args) {
				const call = fromAICall(p.default);
				const prop = schema.properties[call.key];
				// The model reads the schema's words first, then what n8n's tool schema cannot say.
				assert.ok(call.description.startsWith(prop.description), `${call.key}: description`);
				assert.equal(p.description, prop.description);
				if (prop.enum) {
					assert.equal(call.description, `${prop.description} One of: ${prop.enum.map((o) => JSON.stringify(o)).join(', ')}.`);
				}
				const required = (schema.required ?? []).includes(call.key);
				assert.equal(p.required, required, `${call.key}: required`);
				assert.equal(call.defaultValue === undefined, required, `${call.key}: optional arguments have a $fromAI default`);
				if (prop.enum) {
					assert.equal(p.type, 'options');
					assert.deepEqual(p.options.map((o) => o.value), prop.enum);
				}
				const types = { string: 'string', integer: 'number', boolean: 'boolean', object: 'json', array: 'json' };
				const want = prop.type ? types[prop.type] : call.key === 'params' ? 'json' : 'string';
				assert.equal(call.type, want, `${call.key}: $fromAI type`);
				if (want === 'json') {
					assert.match(call.description, / Type: a JSON (object|array)\b/, `${call.key}: the JSON shape is named`);
					// Optional JSON has the omitted marker as default: n8n's json type refuses an empty one.
					if (!required) assert.deepEqual(call.defaultValue, prop.type === 'object' ? { omitted: true } : ['omitted']);
				}
				if (want === 'json' || prop.type === 'object' || prop.type === 'array' || call.key === 'params') {
					assert.equal(p.type, 'json', `${call.key}: a JSON parameter in the editor`);
				}
			}
		});

		test('gives the model a tool schema whose required arguments are the schema\'s', () => {
			// The same construction as n8n-core's createNodeAsTool.
			const shape = {};
			for (const p of args) {
				const call = fromAICall(p.default);
				shape[call.key] = workflow.generateZodSchema(call);
			}
			const tool = z.object(shape).required();
			const required = Object.entries(tool.shape)
				.filter(([, s]) => !s.isOptional())
				.map(([k]) => k);
			assert.deepEqual(required.sort(), [...(schema.required ?? [])].sort());
			for (const [key, s] of Object.entries(tool.shape)) {
				assert.ok(s.description.startsWith(schema.properties[key].description), key);
			}
		});

		test('as a tool: a description naming the pinned values, and a response size limit', () => {
			const [description, limit] = agentParams.map((name) => d.properties.find((p) => p.name === name));
			for (const p of [description, limit]) assert.deepEqual(p.displayOptions, { show: { '@tool': [true] } });
			assert.equal(limit.default, 16384);
			// The expression as n8n evaluates it for the tool node, whose parameters $parameter reads.
			const proxy = (parameters) => {
				const toolNode = { name: 'n', type: `n8n-nodes-pgtools.${d.name}Tool`, typeVersion: 1, parameters: { ...Object.fromEntries(args.map((p) => [p.name, p.default])), ...parameters }, id: 'x', position: [0, 0] };
				const wf = new workflow.Workflow({ nodes: [toolNode], connections: {}, active: false, nodeTypes: { getByName: () => node, getByNameAndVersion: () => node } });
				return wf.expression.getSimpleParameterValue(toolNode, description.default, 'manual', {});
			};
			assert.equal(proxy({}), schema.description, 'nothing pinned: the schema\'s description');
			const [first] = args;
			const key = fromAICall(first.default).key;
			assert.equal(proxy({ [first.name]: 'sales' }), `${schema.description} Fixed for this tool: ${key} "sales".`);
			assert.equal(proxy({ [first.name]: '={{ $json.x }}' }), schema.description, 'an expression is not a pinned value');
		});

		test('evaluates as an n8n expression to the $fromAI default', () => {
			for (const p of args) {
				assert.match(p.default, /^=\{\{ \$fromAI\(.*\) \}\}$/s);
				assert.ok(!p.default.slice(3, -2).includes('}}'), 'no closing braces inside the expression');
			}
		});
	});
}

test('the tool names the model sees are the wire names', () => {
	for (const [className, want] of Object.entries(expected)) {
		const d = loadNode(className).description;
		assert.equal(workflow.nodeNameToToolName(d.defaults.name), want.tool);
	}
});

test('the pgtools API credential sends a bearer token and tests itself with GET /v1/tools', () => {
	const c = loadCredential();
	assert.equal(c.name, 'pgToolsApi');
	assert.equal(c.displayName, 'Pgtools API');
	assert.deepEqual(c.properties.map((p) => p.name), ['url', 'token']);
	assert.equal(c.properties[1].typeOptions.password, true);
	assert.deepEqual(c.authenticate, {
		type: 'generic',
		properties: { headers: { Authorization: '=Bearer {{$credentials.token}}' } },
	});
	// Declarative, because a test function needs the legacy request helper, which n8n's
	// verification scanner refuses; n8n sends it with the authenticate header above.
	assert.equal(c.test.request.url, '/v1/tools');
	assert.equal(c.test.request.method, 'GET');
	assert.match(c.test.request.baseURL, /^=\{\{.*\$credentials\.url.*\}\}$/);
	assert.deepEqual(
		c.test.rules.map((r) => [r.type, r.properties.value]),
		[
			['responseCode', 401],
			['responseCode', 404],
		],
	);
	assert.match(c.test.rules[0].properties.message, /refused this token.*PGTOOLS_TOKENS/);
	assert.match(c.test.rules[1].properties.message, /without \/v1/);
	for (const className of Object.keys(expected)) {
		const node = loadNode(className);
		assert.equal(node.description.credentials[0].testedBy, undefined, `${className}: the credential's own test runs`);
		assert.equal(node.methods?.credentialTest, undefined, className);
	}
	const dir = dirname(join(root, pkg.n8n.credentials[0]));
	for (const icon of [c.icon.light, c.icon.dark]) {
		assert.ok(existsSync(join(dir, icon.replace(/^file:/, ''))), `${icon} exists`);
	}
});
