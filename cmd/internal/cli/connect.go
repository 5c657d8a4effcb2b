package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/store/connection"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "connect",
		Usage: "--firm FIRM --role ROLE --system SYSTEM [--access-key KEY] | choose | list | reconnect | disconnect | stage-map ...",
		Short: "Connects a firm's own practice-management system, ledger or document store on a running gateway",
		Long: `
Connects one of a firm's own systems for a role (records, ledger or documents),
as the firm's administrator does from the console's Systems page: it prints the
gateway's consent link to open in a browser (single use: the consent finishes
only in the browser that opened it), then waits for the consent and
prints the organisation connected, or the organisations to choose from. Karbon
takes the firm's access key instead and connects at once. The command talks to
the running gateway's admin endpoint; the gateway's connect block registers the
vendor apps.

  practicegw connect --firm frm_hollis --role ledger --system xero
  practicegw connect --firm frm_hollis --role records --system karbon --access-key KEY
  practicegw connect choose --firm frm_hollis --connection con_... --tenant TENANT_ID
  practicegw connect list --firm frm_hollis
  practicegw connect reconnect --firm frm_hollis --connection con_...
  practicegw connect disconnect --firm frm_hollis --connection con_...
  practicegw connect stage-map --firm frm_hollis --system xpm [--set "STATE=STAGE"]
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Long += "\nThe systems a firm can connect with this build, where the gateway's connect\nblock registers their app:\n\n" + knownSystems(true) + "\n"
			configureConnect(cmd, time.Second)
			cmd.AddCommand(chooseCommand(), connectionsListCommand(), reconnectCommand(time.Second), disconnectCommand(), stageMapCommand())
		},
	})
}

// configureConnect makes cmd the connect command, polling every poll.
func configureConnect(cmd *cobra.Command, poll time.Duration) {
	cmd.Args = noArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := requireFlags(cmd, "firm", "role", "system"); err != nil {
			return err
		}
		f := cmd.Flags()
		firm, _ := f.GetString("firm")
		role, _ := f.GetString("role")
		system, _ := f.GetString("system")
		wait, _ := f.GetDuration("timeout")
		key, err := accessKey(cmd)
		if err != nil {
			return err
		}
		var v connection.View
		req := connection.Request{Role: role, System: system, AccessKey: key}
		if err := adminCall(cmd, "POST", connectionsPath(firm, ""), req, &v); err != nil {
			return err
		}
		return awaitConnection(cmd, firm, v, wait, poll)
	}
	f := cmd.Flags()
	f.String("firm", "", "the firm, such as frm_hollis")
	f.String("role", "", "records, ledger or documents")
	f.String("system", "", "the system, one of "+systemNames())
	f.String("access-key", "", "the firm's access key, for a system connected by one ("+keySystems()+"); - reads it from standard input")
	f.Duration("timeout", connection.AuthorizationTTL, "how long to wait for the consent")
	addAdminFlag(cmd)
}

func connectionsPath(firm, id string) string {
	p := "/practicegw/connections/" + url.PathEscape(firm)
	if id != "" {
		p += "/" + url.PathEscape(id)
	}
	return p
}

// awaitConnection prints the consent page of a pending connection and
// polls it until the consent comes back, it fails, or wait is over.
func awaitConnection(cmd *cobra.Command, firm string, v connection.View, wait, poll time.Duration) error {
	out := cmd.OutOrStdout()
	switch {
	case v.Status == connection.Pending && v.AuthorizeURL != "":
		fmt.Fprintf(out, "Connection %s: open this page in a browser and allow access to %s:\n\n  %s\n\nWaiting for the consent (up to %s)...\n",
			v.ID, systemName(v), v.AuthorizeURL, wait)
	case v.Status == connection.Pending:
		fmt.Fprintf(out, "Connection %s: waiting for %s (up to %s)...\n", v.ID, systemName(v), wait)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), wait)
	defer cancel()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for v.Status == connection.Pending {
		select {
		case <-ctx.Done():
			return fmt.Errorf("no consent for %s within %s: it is still pending; run practicegw connect again to get a new page", v.ID, wait)
		case <-tick.C:
		}
		if err := adminCall(cmd, "GET", connectionsPath(firm, v.ID), nil, &v); err != nil {
			return err
		}
	}
	if v.Status == connection.Disconnected {
		return fmt.Errorf("%s was disconnected (%s) before it was connected", systemName(v), v.ID)
	}
	return reportConnection(out, firm, v)
}

// reportConnection says where a connection stands and what to do next.
func reportConnection(out io.Writer, firm string, v connection.View) error {
	name := systemName(v)
	switch v.Status {
	case connection.Connected:
		fmt.Fprintf(out, "%s is connected for %s as %s (%s)", name, firm, v.Role, v.ID)
		if v.OrganisationName != "" {
			fmt.Fprintf(out, ": %s", v.OrganisationName)
		}
		fmt.Fprintln(out, ". Its sync has started: practicegw sync status --firm "+firm)
		return nil
	case connection.ChooseOrganisation:
		fmt.Fprintf(out, "%s gave access to several %ss; choose the one %s should read:\n\n", name, organisationWord(v), firm)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tNAME")
		for _, c := range v.Choices {
			fmt.Fprintf(tw, "%s\t%s\n", c.ID, c.Name)
		}
		tw.Flush()
		fmt.Fprintf(out, "\n  practicegw connect choose --firm %s --connection %s --tenant TENANT\n", firm, v.ID)
		return nil
	case connection.Disconnected:
		fmt.Fprintf(out, "%s is disconnected for %s (%s).\n", name, firm, v.ID)
		return nil
	}
	reason := v.Reason
	if reason == "" {
		reason = v.Status.Words()
	}
	return errors.New(name + " was not connected: " + reason)
}

func chooseCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "choose --firm FIRM --connection CONNECTION --tenant TENANT",
		Short: "Chooses the organisation a connection reads, when its consent reached several",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			firm, id, err := connectionFlags(cmd)
			if err != nil {
				return err
			}
			if err := requireFlags(cmd, "tenant"); err != nil {
				return err
			}
			tenant, _ := cmd.Flags().GetString("tenant")
			var v connection.View
			if err := adminCall(cmd, "PATCH", connectionsPath(firm, id), connection.Request{OrganisationID: tenant}, &v); err != nil {
				return err
			}
			return reportConnection(cmd.OutOrStdout(), firm, v)
		},
	}
	cmd.Flags().String("tenant", "", "the organisation's id, from the list connect printed")
	addConnectionFlags(cmd)
	return cmd
}

func reconnectCommand(poll time.Duration) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reconnect --firm FIRM --connection CONNECTION [--access-key KEY]",
		Short: "Asks for a new consent for a connection (a new access key for Karbon), and waits for it",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			firm, id, err := connectionFlags(cmd)
			if err != nil {
				return err
			}
			key, err := accessKey(cmd)
			if err != nil {
				return err
			}
			wait, _ := cmd.Flags().GetDuration("timeout")
			var v connection.View
			if err := adminCall(cmd, "PATCH", connectionsPath(firm, id), connection.Request{Reconnect: true, AccessKey: key}, &v); err != nil {
				return err
			}
			return awaitConnection(cmd, firm, v, wait, poll)
		},
	}
	cmd.Flags().String("access-key", "", "the firm's new access key, for a system connected by one ("+keySystems()+"); - reads it from standard input")
	cmd.Flags().Duration("timeout", connection.AuthorizationTTL, "how long to wait for the consent")
	addConnectionFlags(cmd)
	return cmd
}

func disconnectCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "disconnect --firm FIRM --connection CONNECTION",
		Short: "Disconnects a system: revokes its grant, removes its webhooks, stops its sync and purges its copy",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			firm, id, err := connectionFlags(cmd)
			if err != nil {
				return err
			}
			var v connection.View
			if err := adminCall(cmd, "DELETE", connectionsPath(firm, id), nil, &v); err != nil {
				return err
			}
			return reportConnection(cmd.OutOrStdout(), firm, v)
		},
	}
	addConnectionFlags(cmd)
	return cmd
}

func connectionsListCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list --firm FIRM [--json]",
		Short: "Lists a firm's connections and where each stands",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "firm"); err != nil {
				return err
			}
			firm, _ := cmd.Flags().GetString("firm")
			asJSON, _ := cmd.Flags().GetBool("json")
			var list struct {
				Data []connection.View `json:"data"`
			}
			if err := adminCall(cmd, "GET", connectionsPath(firm, ""), nil, &list); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list.Data)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CONNECTION\tROLE\tSYSTEM\tSTATUS\tREADS\tREASON")
			for _, v := range list.Data {
				reads := "-"
				if v.OrganisationName != "" {
					reads = organisationWord(v) + " " + v.OrganisationName
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, v.Role, systemName(v), viewStanding(v), reads, orDash(v.Reason))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().String("firm", "", "the firm, such as frm_hollis")
	cmd.Flags().Bool("json", false, "print as JSON")
	addAdminFlag(cmd)
	return cmd
}

func addConnectionFlags(cmd *cobra.Command) {
	cmd.Flags().String("firm", "", "the firm, such as frm_hollis")
	cmd.Flags().String("connection", "", "the connection's id, con_...")
	addAdminFlag(cmd)
}

func connectionFlags(cmd *cobra.Command) (firm, id string, err error) {
	if err := requireFlags(cmd, "firm", "connection"); err != nil {
		return "", "", err
	}
	firm, _ = cmd.Flags().GetString("firm")
	id, _ = cmd.Flags().GetString("connection")
	return firm, id, nil
}

// accessKey is --access-key, read from standard input when it is "-",
// so that the key need not be in the shell's history or the process list.
func accessKey(cmd *cobra.Command) (string, error) {
	key, _ := cmd.Flags().GetString("access-key")
	if key != "-" {
		return key, nil
	}
	line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the access key from standard input: %w", err)
	}
	if key = strings.TrimSpace(line); key == "" {
		return "", errors.New("standard input held no access key")
	}
	return key, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// systemName is how people name a connection's system, as the gateway
// answered it.
func systemName(v connection.View) string {
	if v.SystemName != "" {
		return v.SystemName
	}
	return v.System
}

// organisationWord is the vendor's word for what a grant of v's system
// reaches ("site", "company", "organisation", "account").
func organisationWord(v connection.View) string {
	how, _ := firmsystem.ConnectsOf(v.Role, v.System)
	return how.OrganisationWord()
}

// viewStanding is one word for a connection that is true of its data too:
// a connected one says the state of its sync (live, lagging, failing).
func viewStanding(v connection.View) string {
	if v.Status != connection.Connected || len(v.Sync) == 0 {
		return v.Status.Words()
	}
	if v.Sync[0].State == "backfilling" {
		return "connected, copying its records"
	}
	return "connected, " + v.Sync[0].State
}
