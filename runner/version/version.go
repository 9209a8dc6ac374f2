// Package version holds the build's version, which every transport reports (MCP server info,
// OpenAPI info, the pgtools_build_info metric, the OpenTelemetry resource, pgtools version).
package version

// Version is the pgtools version, set at link time with
// -ldflags "-X github.com/pgtools/pgtools/runner/version.Version=v1.2.3" ("dev" without a stamp).
var Version = "dev"
