// Test helpers: the built package (dist/) loaded the way n8n loads it, and a minimal
// IExecuteFunctions that evaluates each parameter's default $fromAI() expression the way n8n
// does for a tool call (the model's argument, else the $fromAI default); and a copy of the sources
// to plant lint and scanner violations in.
import { cpSync, existsSync, mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const require = createRequire(join(root, 'package.json'));
export const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

if (!existsSync(join(root, 'dist', 'n8n-nodes'))) {
	throw new Error('dist/ is missing: run npm run build (make test-nodes does) first');
}

export const workflow = require('n8n-workflow');

/** nodeFiles maps each registered node class name to its compiled file. */
export const nodeFiles = Object.fromEntries(
	pkg.n8n.nodes.map((file) => [file.split('/').pop().replace('.node.js', ''), join(root, file)]),
);

/** otherNodes are the classes of the nodes that are not built from schemas/: the Custom Tool node and the Pgtools Approval node. */
export const otherNodes = ['CustomTool', 'PgtoolsApproval'];

/** builtInNodes are the classes of the built-in tools' nodes (usableAsTool, built from schemas/): all but otherNodes. */
export const builtInNodes = Object.keys(nodeFiles).filter((className) => !otherNodes.includes(className));

/** loadNode instantiates a node class from dist/, as n8n does. */
export function loadNode(className) {
	const mod = require(nodeFiles[className]);
	return new mod[className]();
}

export function loadCredential() {
	const file = join(root, pkg.n8n.credentials[0]);
	return new (require(file).PgToolsApi)();
}

/** schemaOf reads a tool's schema from schemas/ (not from dist), the source of truth. */
export function schemaOf(tool) {
	return JSON.parse(readFileSync(join(root, 'schemas', `${tool}.json`), 'utf8'));
}

/** toolNames are the wire names in canonical order, as the built package lists them (from schemas/). */
export const { toolNames } = require(join(root, 'dist', 'n8n-nodes', 'shared', 'schemas.js'));

/** hiddenInNodes lists a tool's arguments the nodes do not offer the model (its x-pgtools metadata). */
export function hiddenInNodes(tool) {
	return schemaOf(tool)['x-pgtools'].hiddenInNodes ?? [];
}

/** fromAICall parses a parameter default with n8n's own $fromAI parser. */
export function fromAICall(value) {
	const calls = workflow.extractFromAICalls(String(value));
	if (calls.length !== 1) throw new Error(`expected one $fromAI call in ${value}`);
	return calls[0];
}

/**
 * modelArguments are the $fromAI() calls n8n turns into the tool schema the model sees, found
 * the way n8n-core's createNodeAsTool finds them: in every parameter of the node (defaults, then
 * the builder's values in parameters), not only in those meant for the model.
 */
export function modelArguments(description, parameters = {}) {
	const values = { ...Object.fromEntries(description.properties.map((p) => [p.name, p.default])), ...parameters };
	const calls = [];
	workflow.traverseNodeParameters(values, calls);
	return calls;
}

/** toolParameters are a node's parameters that are tool arguments (a $fromAI default), without Connection. */
export function toolParameters(description) {
	return description.properties.filter((p) => String(p.default).includes('$fromAI('));
}

/**
 * context builds a fake IExecuteFunctions for node.execute.
 * - args: the model's tool-call arguments per item (an array), or pinned: fixed parameter values
 *   (a function of the item index stands for an expression evaluated per item)
 * - parameters: the node's raw parameters as saved (what getNode().parameters holds)
 * - request: async (options) => response, standing in for httpRequestWithAuthentication
 * - asTool: run as the generated <node>Tool type (default true)
 * - startJob: async (type, settings, itemIndex) => result, standing in for n8n's startJob (the
 *   task-runner connection); jobs records its calls, credentialsRead the credentials read
 */
export function context(node, { args = [{}], pinned = {}, parameters = {}, request, startJob, asTool = true, continueOnFail = false, credentials }) {
	const calls = [];
	const jobs = [];
	const credentialsRead = [];
	const type = `n8n-nodes-pgtools.${node.description.name}${asTool ? 'Tool' : ''}`;
	const properties = Object.fromEntries(node.description.properties.map((p) => [p.name, p]));
	return {
		calls,
		jobs,
		credentialsRead,
		getInputData: () => args.map((json) => ({ json })),
		getNode: () => ({ name: node.description.defaults.name, type, typeVersion: 1, parameters, id: 'x', position: [0, 0] }),
		continueOnFail: () => continueOnFail,
		getCredentials: async (name) => {
			credentialsRead.push(name);
			if (name !== 'pgToolsApi') throw new Error(`unexpected credential ${name}`);
			return credentials ?? { url: 'http://runner.test:8080/', token: 'tok' };
		},
		getNodeParameter(name, itemIndex, fallback) {
			if (name in pinned) return typeof pinned[name] === 'function' ? pinned[name](itemIndex) : pinned[name];
			const property = properties[name];
			if (!property) return fallback;
			// Parameters that are not tool arguments (Connection) hold plain values.
			if (!String(property.default).includes('$fromAI(')) return property.default;
			const call = fromAICall(property.default);
			const given = args[itemIndex]?.[call.key];
			return given ?? call.defaultValue;
		},
		...(startJob && {
			startJob: async (type, settings, itemIndex) => {
				// args travel as JSON text (lossless); recorded parsed, with the text in argsText.
				const recorded = structuredClone(settings);
				if (typeof recorded.args === 'string') {
					recorded.argsText = recorded.args;
					recorded.args = JSON.parse(recorded.args);
				}
				jobs.push({ type, settings: recorded, itemIndex });
				return await startJob(type, settings, itemIndex);
			},
		}),
		helpers: {
			httpRequestWithAuthentication: async function (credentialType, options) {
				// The body travels as JSON text (lossless); recorded parsed, with the text in bodyText.
				const recorded = structuredClone(options);
				if (typeof recorded.body === 'string') {
					recorded.bodyText = recorded.body;
					recorded.body = JSON.parse(recorded.body);
				}
				calls.push({ credentialType, options: recorded });
				return await request(options);
			},
		},
	};
}

/** answer is a full HTTP response as httpRequestWithAuthentication returns it with returnFullResponse. */
export function answer(statusCode, body) {
	return { statusCode, body, headers: {}, statusMessage: '' };
}

/**
 * sourceCopy copies what the lint and the scanner read of the package's sources (package.json,
 * tsconfig.json, schemas/ and n8n-nodes/'s nodes, credentials, shared code and icons) into a new
 * temporary directory, links the repository's node_modules into it so imports resolve, and
 * returns it; a test plants violations there, never in the sources. Remove it with rmSync.
 */
export function sourceCopy() {
	const dir = mkdtempSync(join(tmpdir(), 'pgtools-sources-'));
	for (const entry of ['package.json', 'tsconfig.json', 'schemas', 'n8n-nodes/nodes', 'n8n-nodes/credentials', 'n8n-nodes/shared', 'n8n-nodes/icons']) {
		cpSync(join(root, entry), join(dir, entry), { recursive: true });
	}
	symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
	return dir;
}
