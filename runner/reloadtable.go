package runner

// onReload is what a configuration reload does with a setting whose value changed.
type onReload int

const (
	// needsRestart keeps the running value until the process restarts: the reload logs the
	// setting and counts it in pgtools_config_restart_pending. It is the zero value, so a key
	// the table lacks needs a restart.
	needsRestart onReload = iota
	// appliesLive gives the new value to the calls and n8n tasks that start after the reload:
	// the next generation's registry and handler, or the broker clients (brokers.apply).
	appliesLive
)

// reloadTable says, for every key of schemas/config.schema.json by its path
// (config.SchemaKeys: "*" for any database name or list item), whether a reload applies a
// changed value or the change needs a restart. A key it lacks needs a restart, and
// TestReloadTableCoversTheSchema fails until the key is added here. docs/configuration.md
// lists the same table for operators.
//
// A key holding further keys (tokens, databases.*) is listed for completeness: changes are
// found, and decided, at the keys that hold values.
var reloadTable = map[string]onReload{
	// Ignored by pgtools.
	"$schema": appliesLive,

	// The listeners, the process's name and its logs are set up once.
	"listen":         needsRestart,
	"metrics_listen": needsRestart,
	"replica_id":     needsRestart,
	// The state database is opened, the replica registered and its peers found, once.
	"state":               needsRestart,
	"state_schema":        needsRestart,
	"fleet":               needsRestart,
	"fleet.advertise_url": needsRestart,
	"fleet.peers":         needsRestart,
	"fleet.peers_dns":     needsRestart,
	"fleet.scheme":        needsRestart,
	"fleet.secret_file":   needsRestart,
	"audit_log":           needsRestart,
	"log_level":           needsRestart,

	// The HTTP handler of each generation.
	"openapi_public":                          appliesLive,
	"limits":                                  appliesLive,
	"limits.max_body_bytes":                   appliesLive, // the broker clients' args cap too
	"limits.rate_per_second":                  appliesLive,
	"limits.auth_failures_per_second":         appliesLive, // counts start afresh with the new handler
	"limits.approver_calls_per_second":        appliesLive,
	"limits.burst":                            appliesLive,
	"limits.max_concurrent_per_token":         appliesLive,
	"limits.max_concurrent_per_subject":       appliesLive,
	"mcp":                                     appliesLive,
	"mcp.structured_content":                  appliesLive,
	"mcp.allowed_origins":                     appliesLive,
	"jwt":                                     appliesLive,
	"jwt.name":                                appliesLive,
	"jwt.issuer":                              appliesLive,
	"jwt.audience":                            appliesLive,
	"jwt.secret_file":                         appliesLive,
	"jwt.jwks_file":                           appliesLive,
	"jwt.jwks_url":                            appliesLive,
	"jwt.leeway_seconds":                      appliesLive,
	"jwt.role_claim":                          appliesLive,
	"jwt.roles":                               appliesLive,
	"jwt.default_role":                        appliesLive,
	"jwt.default_scopes":                      appliesLive,
	"jwt.databases":                           appliesLive,
	"mcp_oauth":                               appliesLive,
	"mcp_oauth.resource":                      appliesLive,
	"mcp_oauth.authorization_servers":         appliesLive,
	"mcp_oauth.scopes_supported":              appliesLive,
	"tokens":                                  appliesLive,
	"tokens.*":                                appliesLive,
	"tokens.*.token":                          appliesLive,
	"tokens.*.token_file":                     appliesLive,
	"tokens.*.name":                           appliesLive,
	"tokens.*.scopes":                         appliesLive,
	"tokens.*.databases":                      appliesLive,
	"tokens.*.tools":                          appliesLive,
	"tokens.*.max_response_bytes":             appliesLive,
	"tokens.*.max_estimated_cost":             appliesLive,
	"tokens.*.max_estimated_rows":             appliesLive,
	"tokens.*.default_format":                 appliesLive,
	"tokens.*.role":                           appliesLive,
	"tokens.*.act_as":                         appliesLive,
	"tokens.*.act_as_role":                    appliesLive,
	"tokens.*.act_as_claims":                  appliesLive,
	"tokens.*.require_approval":               appliesLive,
	"tokens.*.require_approval.*":             appliesLive,
	"tokens.*.require_approval.*.when":        appliesLive,
	"tokens.*.require_approval.*.rows":        appliesLive,
	"tokens.*.require_approval.*.table":       appliesLive,
	"tokens.*.require_approval.*.tool":        appliesLive,
	"page_tokens":                             appliesLive,
	"page_tokens.key_file":                    appliesLive,
	"page_tokens.ttl_seconds":                 appliesLive,
	"custom_tools":                            appliesLive,
	"custom_tools.*":                          appliesLive,
	"custom_tools.*.name":                     appliesLive,
	"custom_tools.*.description":              appliesLive,
	"custom_tools.*.database":                 appliesLive,
	"custom_tools.*.sql":                      appliesLive,
	"custom_tools.*.mode":                     appliesLive,
	"custom_tools.*.order_by":                 appliesLive,
	"custom_tools.*.parameters":               appliesLive,
	"custom_tools.*.parameters.*":             appliesLive,
	"custom_tools.*.parameters.*.name":        appliesLive,
	"custom_tools.*.parameters.*.type":        appliesLive,
	"custom_tools.*.parameters.*.items":       appliesLive,
	"custom_tools.*.parameters.*.items.type":  appliesLive,
	"custom_tools.*.parameters.*.description": appliesLive,
	"custom_tools.*.parameters.*.required":    appliesLive,
	"custom_tools.*.parameters.*.default":     appliesLive,
	"custom_tools.*.parameters.*.enum":        appliesLive,
	"custom_tools.*.parameters.*.minimum":     appliesLive,
	"custom_tools.*.parameters.*.maximum":     appliesLive,
	"custom_tools.*.parameters.*.maxLength":   appliesLive,

	// The set of databases is fixed at start (Reload refuses to add or remove one), and each
	// database's pool is opened once: the connection settings and what its connections carry
	// as session defaults (tools.PoolConfig) stay.
	"databases":                               needsRestart,
	"databases.*":                             needsRestart,
	"databases.*.url":                         needsRestart,
	"databases.*.url_file":                    needsRestart,
	"databases.*.password_file":               needsRestart,
	"databases.*.max_conns":                   needsRestart,
	"databases.*.policy.statement_timeout_ms": needsRestart,
	"databases.*.policy.lock_timeout_ms":      needsRestart,
	"databases.*.policy.prepared_statements":  needsRestart,
	// The rest of a database's policy is the generation's.
	"databases.*.policy":                          appliesLive,
	"databases.*.policy.read_only":                appliesLive,
	"databases.*.policy.allow_ddl":                appliesLive,
	"databases.*.policy.allowed_schemas":          appliesLive,
	"databases.*.policy.allow_tables":             appliesLive,
	"databases.*.policy.deny_tables":              appliesLive,
	"databases.*.policy.table_lists":              appliesLive,
	"databases.*.policy.default_limit":            appliesLive,
	"databases.*.policy.max_limit":                appliesLive,
	"databases.*.policy.max_response_bytes":       appliesLive,
	"databases.*.policy.default_format":           appliesLive,
	"databases.*.policy.transaction_timeout_ms":   appliesLive,
	"databases.*.policy.pool_wait_ms":             appliesLive,
	"databases.*.policy.max_affected_rows":        appliesLive,
	"databases.*.policy.max_estimated_cost":       appliesLive,
	"databases.*.policy.max_estimated_rows":       appliesLive,
	"databases.*.policy.require_approval":         appliesLive,
	"databases.*.policy.require_approval.*":       appliesLive,
	"databases.*.policy.require_approval.*.when":  appliesLive,
	"databases.*.policy.require_approval.*.rows":  appliesLive,
	"databases.*.policy.require_approval.*.table": appliesLive,
	"databases.*.policy.require_approval.*.tool":  appliesLive,
	"databases.*.policy.approval_by_client":       appliesLive,
	"databases.*.policy.disabled_tools":           appliesLive,
	"databases.*.policy.mask_error_values":        appliesLive,

	// The session manager, the pg_transaction bound and the approval store live as long as the
	// process, so sessions and requests survive a reload; their limits are theirs from the start.
	"sessions":                                needsRestart,
	"sessions.max_sessions":                   needsRestart,
	"sessions.max_sessions_per_principal":     needsRestart,
	"sessions.max_transactions":               needsRestart,
	"sessions.max_transactions_per_principal": needsRestart,
	"sessions.max_sessions_per_subject":       needsRestart,
	"sessions.max_transactions_per_subject":   needsRestart,
	"sessions.ttl_seconds":                    needsRestart,
	"approvals":                               needsRestart,
	"approvals.ttl_seconds":                   needsRestart,
	"approvals.max_pending":                   needsRestart,

	// The server's shutdown is planned at start.
	"shutdown":                     needsRestart,
	"shutdown.drain_delay_seconds": needsRestart,
	"shutdown.grace_seconds":       needsRestart,

	// The broker clients keep their connections, token and principal; the task timeout is
	// read per task.
	"n8n":                 needsRestart,
	"n8n.brokers":         needsRestart,
	"n8n.token":           needsRestart,
	"n8n.token_file":      needsRestart,
	"n8n.principal":       needsRestart,
	"n8n.role":            needsRestart,
	"n8n.act_as":          needsRestart,
	"n8n.task_timeout_ms": appliesLive,
}
