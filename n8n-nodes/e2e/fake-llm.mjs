// A scripted, OpenAI-compatible chat model for the end-to-end test: POST /v1/chat/completions
// (plain or streamed) and GET /v1/models on 127.0.0.1. The test sets a script per run; the
// script sees the conversation so far and answers with tool calls or a final text, and every
// request is recorded (the messages, and the tools with their JSON Schemas).
import { createServer } from 'node:http';

/**
 * startFakeLLM listens on a free loopback port. script(messages, tools) returns
 * { toolCalls: [{ name, arguments }] } or { content }.
 */
export async function startFakeLLM() {
	const state = { script: undefined, requests: [], errors: [] };
	let calls = 0;
	const server = createServer(async (req, res) => {
		try {
			const url = new URL(req.url, 'http://x');
			if (req.method === 'GET' && url.pathname.endsWith('/models')) {
				return send(res, 200, { object: 'list', data: [{ id: 'gpt-4.1-mini', object: 'model', created: 0, owned_by: 'pgtools-e2e' }] });
			}
			if (req.method !== 'POST' || !url.pathname.endsWith('/chat/completions')) {
				return send(res, 404, { error: { message: `fake LLM: no route ${req.method} ${url.pathname}` } });
			}
			const body = JSON.parse(await read(req));
			state.requests.push(body);
			if (!state.script) throw new Error('no script set');
			const reply = state.script(body.messages, body.tools ?? []);
			const message = { role: 'assistant', content: reply.content ?? null };
			if (reply.toolCalls) {
				message.tool_calls = reply.toolCalls.map((c) => ({
					id: `call_${++calls}`,
					type: 'function',
					// rawArguments: the arguments' JSON text as a model writes it (e.g. an integer past 2^53).
					function: { name: c.name, arguments: c.rawArguments ?? JSON.stringify(c.arguments) },
				}));
			}
			const finish = reply.toolCalls ? 'tool_calls' : 'stop';
			const base = { id: `chatcmpl-${calls}`, created: Math.floor(Date.now() / 1000), model: body.model };
			const usage = { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 };
			if (!body.stream) {
				return send(res, 200, { ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: finish }], usage });
			}
			res.writeHead(200, { 'content-type': 'text/event-stream' });
			const chunk = (delta, finish_reason = null, extra = {}) =>
				res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason }], ...extra })}\n\n`);
			const delta = { role: 'assistant', content: message.content ?? '' };
			if (message.tool_calls) delta.tool_calls = message.tool_calls.map((c, index) => ({ index, ...c }));
			chunk(delta);
			chunk({}, finish, { usage });
			res.end('data: [DONE]\n\n');
		} catch (error) {
			state.errors.push(String(error?.stack ?? error));
			send(res, 500, { error: { message: `fake LLM: ${error?.message ?? error}` } });
		}
	});
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	return {
		state,
		url: `http://127.0.0.1:${server.address().port}/v1`,
		/** use sets the script for the next run and clears the record. */
		use(script) {
			state.script = script;
			state.requests = [];
			state.errors = [];
		},
		close: () => new Promise((resolve) => server.close(resolve)),
	};
}

/** toolTexts are the tool answers in a conversation, in order, as the model received them. */
export function toolTexts(messages) {
	return messages
		.filter((m) => m.role === 'tool')
		.map((m) => (typeof m.content === 'string' ? m.content : m.content.map((p) => p.text ?? '').join('')));
}

/**
 * toolResults are the tool answers in a conversation, in order, parsed (n8n sends a JSON array
 * of items). A failed tool run reaches the model as [{"error": <the error's message>}]; a pgtools
 * error's message is its whole error object, returned here parsed, with failed: true.
 */
export function toolResults(messages) {
	return toolTexts(messages).map((text) => {
		const value = JSON.parse(text);
		const item = Array.isArray(value) && value.length === 1 ? value[0] : value;
		if (item && typeof item.error === 'string' && Object.keys(item).length === 1) {
			try {
				const inner = JSON.parse(item.error);
				if (inner?.success === false) return Object.defineProperty(inner, 'failed', { value: true, enumerable: false });
			} catch {}
		}
		return item;
	});
}

function read(req) {
	return new Promise((resolve, reject) => {
		let data = '';
		req.setEncoding('utf8');
		req.on('data', (c) => (data += c));
		req.on('end', () => resolve(data));
		req.on('error', reject);
	});
}

function send(res, status, body) {
	res.writeHead(status, { 'content-type': 'application/json' });
	res.end(JSON.stringify(body));
}
