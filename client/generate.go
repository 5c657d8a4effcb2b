package client

// The client is generated from the document a gateway serves, with the
// generators the repository pins (oapi-codegen as a tool in go.mod;
// openapi-typescript in typescript/package-lock.json), and committed;
// TestGeneratedClientsAreCurrent fails when what is committed is not what
// these make of the document served now.
//go:generate go run ./internal/servedoc -o openapi.json
//go:generate go tool oapi-codegen -config oapi-codegen.yaml -o client.gen.go openapi.json
//go:generate npm --prefix typescript run --silent generate
