package cli

import (
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/store/usage"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "credential",
		Usage: "issue|list|revoke ...",
		Short: "Issues, lists and revokes API credentials of a running gateway",
		Long: `
Manages the bearer credentials integrations use against /v1. Each credential
belongs to one firm, carries the least scopes it needs and can be revoked on
its own. The command talks to the running gateway's admin endpoint.

  practicegw credential issue --firm frm_acme --name "Zapier sync" --scopes jobs:read,jobs:write
  practicegw credential list --firm frm_acme
  practicegw credential revoke crd_...
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.AddCommand(issueCommand(), listCommand(), revokeCommand())
		},
	})
}

func issueCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "issue --firm FIRM --name NAME --scopes LIST [--sandbox] [--rate-limit N/h] [--json]",
		Short: "Issues a credential and prints its token once",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "firm", "name", "scopes"); err != nil {
				return err
			}
			f := cmd.Flags()
			firm, _ := f.GetString("firm")
			name, _ := f.GetString("name")
			scopes, _ := f.GetString("scopes")
			sandbox, _ := f.GetBool("sandbox")
			rate, _ := f.GetString("rate-limit")
			asJSON, _ := f.GetBool("json")
			req := map[string]any{"firm": firm, "name": name, "scopes": splitList(scopes), "sandbox": sandbox}
			if rate != "" {
				req["rate_limit"] = rate
			}
			var issued adminapi.IssuedCredential
			if err := adminCall(cmd, "POST", "/practicegw/credentials", req, &issued); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), issued)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Issued %s (%s) for %s with scopes %s.\n", issued.ID, issued.Name, issued.Firm, strings.Join(issued.Scopes, ","))
			fmt.Fprintf(out, "Token (shown once; store it now): %s\n", issued.Token)
			return nil
		},
	}
	f := cmd.Flags()
	f.String("firm", "", "firm the credential belongs to, such as frm_acme")
	f.String("name", "", "the integration's name, such as \"Zapier sync\"")
	f.String("scopes", "", "comma-separated scopes, such as jobs:read,clients:write")
	f.Bool("sandbox", false, "reach the firm's sandbox records only (token starts pgw_test_)")
	f.String("rate-limit", "", "this credential's ceiling, N/s, N/m or N/h (default: the gateway's)")
	f.Bool("json", false, "print the credential and token as JSON")
	addAdminFlag(cmd)
	return cmd
}

func listCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list --firm FIRM [--json]",
		Short: "Lists a firm's credentials with scopes, last use and staleness",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			firm, _ := cmd.Flags().GetString("firm")
			asJSON, _ := cmd.Flags().GetBool("json")
			var list struct {
				Data []adminapi.CredentialView `json:"data"`
			}
			if err := adminCall(cmd, "GET", "/practicegw/credentials?firm="+url.QueryEscape(firm), nil, &list); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list.Data)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tFIRM\tMODE\tSCOPES\tRATE LIMIT\tLAST HOUR\tPEAK HOUR (24H)\tHEADROOM\tLAST USED\tSTATUS")
			for _, c := range list.Data {
				mode, rate, last, status := "live", c.RateLimit, "never", "active"
				if c.Sandbox {
					mode = "sandbox"
				}
				if rate == "" {
					rate = "default"
				}
				if c.LastUsedAt != nil {
					last = c.LastUsedAt.Local().Format(time.DateTime)
				}
				switch {
				case c.RevokedAt != nil:
					status = "revoked"
				case c.Stale:
					status = "stale"
				}
				lastHour, peak, headroom := "-", "-", "-"
				if tr := c.Traffic; tr != nil {
					rate = tr.Ceiling
					lastHour, peak = usageSummary(tr.Hours, time.Now())
					headroom = fmt.Sprintf("%d of %d", tr.Headroom, tr.Limit)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Name, c.Firm, mode,
					strings.Join(c.Scopes, ","), rate, lastHour, peak, headroom, last, status)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().String("firm", "", "only this firm's credentials")
	cmd.Flags().Bool("json", false, "print as JSON")
	addAdminFlag(cmd)
	return cmd
}

func revokeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revokes a credential on every gateway instance",
		Args:  oneArg("the credential's id, such as crd_7a8x… (practicegw credential list shows them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var view adminapi.CredentialView
			if err := adminCall(cmd, "DELETE", "/practicegw/credentials/"+url.PathEscape(args[0]), nil, &view); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Revoked %s (%s).\n", view.ID, view.Name)
			return nil
		},
	}
	addAdminFlag(cmd)
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// usageSummary gives the current hour's and the busiest hour's requests,
// with refusals (429s) in brackets.
func usageSummary(hours []usage.Hour, now time.Time) (current, peak string) {
	current, peak = "0", "0"
	var max int64
	for _, h := range hours {
		total := h.Admitted + h.Refused
		label := fmt.Sprintf("%d", total)
		if h.Refused > 0 {
			label = fmt.Sprintf("%d (%d refused)", total, h.Refused)
		}
		if h.Hour.Equal(now.Truncate(time.Hour)) {
			current = label
		}
		if total > max {
			max, peak = total, label
		}
	}
	return current, peak
}
