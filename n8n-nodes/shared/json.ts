// Lossless JSON for the way through n8n. JavaScript reads every JSON number as a 64-bit float,
// so JSON.parse turns 9007199254740993 into 9007199254740992 and a 30-digit numeric into
// 1.2345678901234568e+29: a bigint key would select or change a neighbouring row. The node
// therefore forwards the model's JSON text as text, and reads the runner's answers with
// parseJson, which keeps every number JavaScript cannot hold exactly as a string of its digits.

/** RawJson is JSON text forwarded as written: its numbers never pass through a JavaScript number. */
export class RawJson {
	constructor(readonly text: string) {}
}

const numberToken = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * quoteInexactNumbers returns text with every number token that JavaScript cannot hold exactly
 * (it would not print back as the same decimal value) turned into a JSON string of the same
 * characters. Strings are skipped; anything that is not valid JSON is left for JSON.parse to
 * report.
 */
export function quoteInexactNumbers(text: string): string {
	let out = '';
	let copied = 0;
	let i = 0;
	while (i < text.length) {
		const c = text.charCodeAt(i);
		if (c === 0x22 /* " */) {
			i++;
			while (i < text.length && text.charCodeAt(i) !== 0x22) i += text.charCodeAt(i) === 0x5c /* \ */ ? 2 : 1;
			i++;
			continue;
		}
		if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
			numberToken.lastIndex = i;
			const m = numberToken.exec(text);
			if (!m) {
				i++;
				continue;
			}
			const token = m[0];
			if (!isExactNumber(token)) {
				out += `${text.slice(copied, i)}"${token}"`;
				copied = i + token.length;
			}
			i += token.length;
			continue;
		}
		i++;
	}
	return copied === 0 ? text : out + text.slice(copied);
}

/**
 * parseJson is JSON.parse that loses no number: a number JavaScript cannot hold exactly (an
 * integer past ±2^53, a numeric with more digits than a double keeps, 1e400) comes back as a
 * string holding its exact digits. Throws SyntaxError for text that is not JSON.
 */
export function parseJson(text: string): unknown {
	return JSON.parse(quoteInexactNumbers(text)) as unknown;
}

/** isExactNumber reports whether a JSON number token survives JSON.parse and JSON.stringify with its value. */
export function isExactNumber(token: string): boolean {
	const n = Number(token);
	if (!Number.isFinite(n)) return false;
	return sameDecimal(token, String(n));
}

// sameDecimal compares two decimal numerals by value: sign, significant digits and the power of
// ten of the first one (1.50, 15e-1 and 1.5 are the same; 9007199254740993 and …992 are not).
function sameDecimal(a: string, b: string): boolean {
	const x = decimal(a);
	const y = decimal(b);
	if (x.digits === '' || y.digits === '') return x.digits === y.digits;
	return x.negative === y.negative && x.digits === y.digits && x.exponent === y.exponent;
}

function decimal(text: string): { negative: boolean; digits: string; exponent: number } {
	const m = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text);
	if (!m) return { negative: false, digits: text, exponent: 0 };
	const [, sign, whole = '', fraction = '', exp = '0'] = m;
	const all = whole + fraction;
	const lead = all.search(/[1-9]/);
	if (lead < 0) return { negative: false, digits: '', exponent: 0 };
	const digits = all.slice(lead).replace(/0+$/, '');
	// The power of ten of the first significant digit.
	const exponent = Number(exp) + whole.length - lead - 1;
	return { negative: sign === '-', digits, exponent };
}

/**
 * inexactNumbers lists the paths of the numbers in value (already parsed by JavaScript, e.g. a
 * model's object argument) that may have been rounded on the way: integers past ±2^53 and
 * fractions with 16 or more significant digits, which a double cannot be trusted to hold.
 */
export function inexactNumbers(value: unknown, path: string): string[] {
	// The path only: an error never repeats a value the caller sent.
	if (typeof value === 'number') return mayBeRounded(value) ? [path] : [];
	if (Array.isArray(value)) return value.flatMap((v, i) => inexactNumbers(v, `${path}[${i}]`));
	if (value !== null && typeof value === 'object') {
		return Object.entries(value).flatMap(([k, v]) => inexactNumbers(v, `${path}.${k}`));
	}
	return [];
}

function mayBeRounded(n: number): boolean {
	if (!Number.isFinite(n)) return true;
	if (Number.isInteger(n)) return !Number.isSafeInteger(n);
	return decimal(String(n)).digits.length >= 16;
}

/** jsonObjectText writes a JSON object of entries, copying RawJson values as written. */
export function jsonObjectText(entries: ReadonlyArray<readonly [string, unknown]>): string {
	const parts = entries.map(([key, value]) => `${JSON.stringify(key)}:${value instanceof RawJson ? value.text : JSON.stringify(value)}`);
	return `{${parts.join(',')}}`;
}
