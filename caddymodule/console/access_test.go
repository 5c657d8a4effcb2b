package console

import (
	"reflect"
	"testing"
)

func TestGroupScopes(t *testing.T) {
	got := groupScopes([]string{"jobs:write", "clients:read", "jobs:read", "webhooks:write", "admin"})
	want := []scopeGroup{{"Clients", "read"}, {"Jobs", "read & write"}, {"Webhooks", "write"}, {"Console & credentials", "manage"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("groupScopes = %v, want %v", got, want)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/console/traffic":     "/console/traffic",
		"/console?x=1":         "/console?x=1",
		"//evil.example/x":     "",
		"https://evil.example": "",
		"/consolex":            "",
		"/v1/jobs":             "",
		"/console/\\evil":      "",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}
