package cli

import (
	"fmt"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/adminapi"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "trigger",
		Usage: "EVENT_KIND --firm FIRM [--admin ADDR] [--json]",
		Short: "Raises one sandbox event of a kind through the whole pipeline",
		Long: `
Makes a realistic change in the firm's sandbox records (a job moved, an
invoice paid, an engagement signed, ...) that raises one event of the given
kind, delivered to the firm's sandbox webhook endpoints like any other, and
prints the event id.

  practicegw trigger job.stage_changed --firm frm_acme
  practicegw trigger invoice.paid --firm frm_acme --json

Kinds: client.created, client.updated, engagement.created, engagement.signed,
engagement_letter.signed, job.opened, job.stage_changed, job.closed,
document.filed, invoice.raised, invoice.paid.
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Args = oneArg("the kind of event to raise, such as job.stage_changed")
			cmd.Flags().String("firm", "", "the firm whose sandbox records change")
			cmd.Flags().Bool("json", false, "print the event id, kind and changed record as JSON")
			addAdminFlag(cmd)
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				if err := requireFlags(cmd, "firm"); err != nil {
					return err
				}
				firm, _ := cmd.Flags().GetString("firm")
				var t adminapi.Triggered
				if err := adminCall(cmd, "POST", "/practicegw/trigger", map[string]string{"firm": firm, "event": args[0]}, &t); err != nil {
					return err
				}
				if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
					return printJSON(cmd.OutOrStdout(), t)
				}
				fmt.Fprintln(cmd.OutOrStdout(), t.EventID)
				return nil
			}
		},
	})
}
