package runner

// Version is the pgtools version, set at link time with
// -ldflags "-X github.com/pgtools/pgtools/runner.Version=v1.2.3" ("dev" without a stamp).
var Version = "dev"
