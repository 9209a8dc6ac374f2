// The tools' JSON Schemas, read from schemas/ at build time (tsc copies them into dist/schemas/),
// so the nodes show the model the same words as the HTTP API and MCP, and take each tool's name,
// node name and class from the same "x-pgtools" object the runner reads.
import { schemaFiles } from './schemaFiles';

/** SchemaProperty is the part of a JSON Schema property the nodes read. */
export interface SchemaProperty {
	description?: string;
	type?: string;
	enum?: readonly string[];
	default?: unknown;
	minimum?: number;
	pattern?: string;
	anyOf?: readonly SchemaProperty[];
	/** properties, required and items describe an object's keys and an array's items, named in the model's description. */
	properties?: Record<string, SchemaProperty>;
	required?: readonly string[];
	items?: SchemaProperty;
}

/** ToolMeta is a tool's "x-pgtools" object: what pgtools knows of it beside its arguments (see schemas/meta.go). */
export interface ToolMeta {
	/** name is the wire name: the HTTP path segment, the MCP tool name and the task's tool. */
	name: string;
	/** order places the tool in the canonical order (ascending). */
	order: number;
	/** displayName is the node's name in n8n, e.g. Select Query. */
	displayName: string;
	/** nodeAlias are the node's search words in n8n (its codex alias, beside postgres and sql). */
	nodeAlias: readonly string[];
	operation: string;
	/** scope is the token scope the tool needs: read or write. */
	scope: string;
	readOnly: boolean;
	destructive: boolean;
	idempotent: boolean;
	/** hiddenInNodes are arguments the nodes do not offer the model (kept for older callers). */
	hiddenInNodes?: readonly string[];
}

/** ToolSchema is the part of a tool's argument schema (schemas/<tool>.json) the nodes read. */
export interface ToolSchema {
	title: string;
	description: string;
	required?: readonly string[];
	properties: Record<string, SchemaProperty>;
	'x-pgtools': ToolMeta;
}

/** ToolName is a tool's wire name: the HTTP path segment and the MCP tool name. */
export type ToolName = keyof typeof schemaFiles;

/**
 * toolSchemas maps every tool to its argument schema, in the runner's canonical order. The list
 * is schemas/ itself: npm run generate writes schemaFiles.ts from it, and the build fails while
 * that file is stale.
 */
export const toolSchemas: Record<ToolName, ToolSchema> = schemaFiles;

/** toolNames lists the wire names in the runner's canonical order. */
export const toolNames = Object.keys(toolSchemas) as ToolName[];
