// A real pgtools runner for the integration and end-to-end tests: `pgtools demo` (a throwaway
// PostgreSQL with the demo shop data, a least-privilege role, and the runner on a free loopback
// port), built from this checkout.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { root } from './helpers.mjs';

/** buildRunner builds cmd/pgtools into a temporary directory (or returns PGTOOLS_BIN). */
export function buildRunner() {
	if (process.env.PGTOOLS_BIN) return process.env.PGTOOLS_BIN;
	const dir = mkdtempSync(join(tmpdir(), 'pgtools-n8n-'));
	process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
	const bin = join(dir, 'pgtools');
	execFileSync('go', ['build', '-o', bin, './cmd/pgtools'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
	return bin;
}

/**
 * startDemo runs `pgtools demo` and resolves once it serves, with its URL and token and a
 * stop() that ends it (the demo drops its throwaway cluster on SIGTERM).
 */
export async function startDemo(bin, { timeoutMs = 120_000 } = {}) {
	const child = spawn(bin, ['demo', '--listen', '127.0.0.1:0', '--events', '1000'], {
		stdio: ['ignore', 'pipe', 'pipe'],
	});
	let output = '';
	const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
	// Should the test process die without stop(), take the demo (and its cluster) with it.
	const orphan = () => child.kill('SIGTERM');
	process.once('exit', orphan);
	exited.then(() => process.off('exit', orphan));
	const ready = await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`pgtools demo did not start in ${timeoutMs} ms:\n${output}`)), timeoutMs);
		const onData = (chunk) => {
			output += chunk;
			const m = /export PGTOOLS_URL=(\S+) PGTOOLS_TOKEN=(\S+)/.exec(output);
			if (m) {
				clearTimeout(timer);
				// The throwaway cluster trusts every local connection, so a second runner can
				// connect as the demo's least-privilege role without its (random) password.
				const pg = /PostgreSQL is up on (127\.0\.0\.1:\d+)/.exec(output);
				const databaseUrl = pg ? `postgres://pgtools_demo@${pg[1]}/pgtools_demo?sslmode=disable` : undefined;
				resolve({ url: m[1], token: m[2], databaseUrl });
			}
		};
		child.stdout.on('data', onData);
		child.stderr.on('data', onData);
		exited.then(({ code, signal }) => {
			clearTimeout(timer);
			reject(new Error(`pgtools demo exited (${code ?? signal}) before serving:\n${output}`));
		});
	});
	return {
		...ready,
		output: () => output,
		async stop() {
			if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
			await exited;
		},
	};
}

/** call posts a tool call straight to the runner (to set up and check state apart from the nodes). */
export async function call(runner, tool, args) {
	const response = await fetch(`${runner.url}/v1/tools/${tool}`, {
		method: 'POST',
		headers: { authorization: `Bearer ${runner.token}`, 'content-type': 'application/json' },
		body: JSON.stringify(args),
	});
	return await response.json();
}

/**
 * startServe runs `pgtools serve` with args and env added to the process environment, and
 * resolves once it serves, with its URL, its parsed JSON log lines (logs, live), and a stop().
 */
export async function startServe(bin, args, { env = {}, timeoutMs = 30_000 } = {}) {
	const child = spawn(bin, ['serve', '--listen', '127.0.0.1:0', ...args], {
		env: { ...process.env, ...env },
		stdio: ['ignore', 'pipe', 'pipe'],
	});
	const logs = [];
	let output = '';
	const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
	const orphan = () => child.kill('SIGTERM');
	process.once('exit', orphan);
	exited.then(() => process.off('exit', orphan));
	const url = await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`pgtools serve did not start in ${timeoutMs} ms:\n${output}`)), timeoutMs);
		let partial = '';
		const onData = (chunk) => {
			output += chunk;
			const lines = (partial + chunk).split('\n');
			partial = lines.pop();
			for (const line of lines) {
				let entry;
				try {
					entry = JSON.parse(line);
				} catch {
					continue;
				}
				logs.push(entry);
				if (entry.message === 'pgtools serving') {
					clearTimeout(timer);
					resolve(`http://${entry.listen}`);
				}
			}
		};
		child.stdout.on('data', onData);
		child.stderr.on('data', onData);
		exited.then(({ code, signal }) => {
			clearTimeout(timer);
			reject(new Error(`pgtools serve exited (${code ?? signal}) before serving:\n${output}`));
		});
	});
	return {
		url,
		logs,
		pid: child.pid,
		running: () => child.exitCode === null && child.signalCode === null,
		async stop() {
			if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
			await exited;
		},
	};
}
