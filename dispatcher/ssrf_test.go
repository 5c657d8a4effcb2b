package dispatcher_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

func TestValidateURLRefusesNonPublicAddresses(t *testing.T) {
	closed := dispatcher.NewAddressPolicy(nil)
	loopbackAllowed := dispatcher.NewAddressPolicy([]netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16"),
	})
	tests := []struct {
		url    string
		policy *dispatcher.AddressPolicy
		// refused is a substring of the error, or "" for allowed.
		refused string
	}{
		{"http://127.0.0.1/hook", closed, "loopback"},
		{"http://127.8.9.10:8080/hook", closed, "loopback"},
		{"http://[::1]/hook", closed, "loopback"},
		{"http://[::ffff:127.0.0.1]/hook", closed, "loopback"},
		{"http://[::ffff:10.0.0.1]/hook", closed, "private"},
		{"http://localhost/hook", closed, "loopback"},
		{"http://LOCALHOST./hook", closed, "loopback"},
		{"http://api.localhost/hook", closed, "loopback"},
		{"http://0x7f.1/hook", closed, "not a valid host name"},
		{"http://127.1/hook", closed, "not a valid host name"},
		{"http://2130706433/hook", closed, "not a valid host name"},
		{"http://0177.0.0.1/hook", closed, "not a valid host name"},
		{"http://10.1.2.3/", closed, "private"},
		{"http://172.16.5.4/", closed, "private"},
		{"http://192.168.1.1/", closed, "private"},
		{"http://[fc00::1]/", closed, "private"},
		{"http://[fd12:3456::1]/", closed, "private"},
		{"http://169.254.1.1/", closed, "link-local"},
		{"http://[fe80::1]/", closed, "link-local"},
		{"http://100.64.0.1/", closed, "carrier-grade NAT"},
		{"http://0.0.0.0/", closed, "this network"},
		{"http://0.1.2.3/", closed, "this network"},
		{"http://[::]/", closed, "unspecified"},
		{"http://224.0.0.1/", closed, "multicast"},
		{"http://[ff02::1]/", closed, "multicast"},
		{"http://255.255.255.255/", closed, "reserved"},
		{"http://192.0.0.8/", closed, "IETF protocol"},
		{"http://198.18.0.1/", closed, "benchmarking"},
		{"http://169.254.169.254/latest/meta-data/", closed, "metadata"},
		{"http://[fd00:ec2::254]/", closed, "metadata"},
		{"http://100.100.100.200/", closed, "metadata"},
		{"http://[::ffff:169.254.169.254]/", closed, "metadata"},
		{"http://[64:ff9b::7f00:1]/", closed, "loopback, through an IPv6 translation prefix"},
		{"http://[2002:a00:1::]/", closed, "private network, through an IPv6 translation prefix"},
		// SIIT's IPv4-translated form, Teredo and ISATAP carry or reach an
		// IPv4 host too.
		{"http://[::ffff:0:7f00:1]/", closed, "loopback, through an IPv6 translation prefix"},
		{"http://[::ffff:0:a00:1]/", closed, "private network, through an IPv6 translation prefix"},
		{"http://[::ffff:0:a9fe:a9fe]/", closed, "metadata"},
		{"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", closed, "Teredo"},
		{"http://[2001::1]/", closed, "Teredo"},
		{"http://[2a01:4f8:1:2:0:5efe:c0a8:101]/", closed, "private network, through an IPv6 translation prefix"},
		{"http://[2a01:4f8:1:2:200:5efe:7f00:1]/", closed, "loopback, through an IPv6 translation prefix"},
		{"http://[2a01:4f8:1:2:0:5efe:5db8:d822]/", closed, ""},
		{"http://[2001:4860:4860::8888]/", closed, ""},
		{"https://93.184.216.34/hook", closed, ""},
		{"https://[2606:4700:4700::1111]/hook", closed, ""},
		{"http://[64:ff9b::5db8:d822]/", closed, ""},
		// The allow-list opens exactly its ranges, in both address forms,
		// and never the metadata services.
		{"http://127.0.0.1:9000/hook", loopbackAllowed, ""},
		{"http://[::ffff:127.0.0.1]/hook", loopbackAllowed, ""},
		{"http://localhost/hook", loopbackAllowed, ""},
		{"http://169.254.1.1/", loopbackAllowed, ""},
		{"http://169.254.169.254/", loopbackAllowed, "metadata"},
		{"http://10.0.0.1/", loopbackAllowed, "private"},
		// Shape rules.
		{"ftp://93.184.216.34/", closed, "absolute http or https"},
		{"/relative/path", closed, "absolute http or https"},
		{"https:///nohost", closed, "absolute http or https"},
		{"http://user:pw@93.184.216.34/", closed, "user name or password"},
		{"https://93.184.216.34/" + strings.Repeat("a", 2048), closed, "at most 2048"},
	}
	for _, tt := range tests {
		err := dispatcher.ValidateURL(context.Background(), tt.policy, tt.url)
		switch {
		case tt.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tt.url, err)
		case tt.refused != "" && err == nil:
			t.Errorf("%s: allowed, want refused for %q", tt.url, tt.refused)
		case tt.refused != "" && !strings.Contains(err.Error(), tt.refused):
			t.Errorf("%s: error %q does not mention %q", tt.url, err, tt.refused)
		}
		var invalid *practice.InvalidError
		if err != nil && (!errors.As(err, &invalid) || invalid.Param != "url") {
			t.Errorf("%s: error %T is not a parameter error on url", tt.url, err)
		}
	}
}

// The connect-time check is what holds when DNS changes after
// registration: it vets the address actually dialled.
func TestDialControlRefusesLoopbackAtConnectTime(t *testing.T) {
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit = true }))
	defer srv.Close()

	policy := dispatcher.NewAddressPolicy(nil)
	dialer := &net.Dialer{Control: policy.Control}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	_, err := client.Get(srv.URL)
	var blocked *dispatcher.BlockedAddressError
	if !errors.As(err, &blocked) || blocked.Reason != "loopback" {
		t.Fatalf("dial error = %v, want a loopback refusal", err)
	}
	if hit {
		t.Fatal("the request reached the server")
	}
}

// A refused receiver on this machine is told, in one sentence, both ways
// to get webhooks there: practicegw listen, or the gateway's allow-list.
func TestLoopbackRefusalNamesBothWaysOut(t *testing.T) {
	closed := dispatcher.NewAddressPolicy(nil)
	for url, want := range map[string]string{
		"http://localhost:3000/hooks": "The url is not allowed: webhooks may not be sent to localhost, which resolves to 127.0.0.1 (loopback); " +
			"for a receiver on this machine, run `practicegw listen --forward-to http://localhost:3000/hooks`, " +
			"or start the gateway with PRACTICEGW_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8,::1/128.",
		"http://10.1.2.3/hooks": "The url is not allowed: webhooks may not be sent to 10.1.2.3 (a private network); " +
			"for a receiver in your own network, start the gateway with PRACTICEGW_WEBHOOK_ALLOW_CIDRS=10.0.0.0/8, " +
			"or forward to it with `practicegw listen --forward-to http://10.1.2.3/hooks`.",
		"http://169.254.169.254/": "The url is not allowed: webhooks may not be sent to 169.254.169.254 (a cloud metadata service).",
	} {
		err := dispatcher.ValidateURL(context.Background(), closed, url)
		var invalid *practice.InvalidError
		if !errors.As(err, &invalid) || invalid.Message != want {
			t.Errorf("%s:\n got %v\nwant %s", url, err, want)
		}
	}
}
