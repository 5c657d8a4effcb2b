package sharepoint

import (
	"context"
	"fmt"
	"net/url"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

// Site is one SharePoint site a Microsoft Graph grant reaches.
type Site struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	DisplayName string `json:"displayName"`
	WebURL      string `json:"webUrl"`
}

// Sites lists the sites the signed-in user of c's token can read (GET
// /sites?search=*, c's base URL Graph's API, .../v1.0), following Graph's
// next links. A site's drive is its default document library, read when
// the firm's system opens (Adapter.driveID).
func Sites(ctx context.Context, c *upstream.Client) ([]Site, error) {
	var out []Site
	req := upstream.Request{Path: "/sites", Query: url.Values{"search": {"*"}}}
	for pages := 0; ; pages++ {
		var page struct {
			Value    []Site `json:"value"`
			NextLink string `json:"@odata.nextLink"`
		}
		if _, err := c.JSON(ctx, req, "sites", &page); err != nil {
			return nil, fmt.Errorf("graph: the sites a grant reaches: %w", err)
		}
		for _, s := range page.Value {
			if s.ID == "" {
				return nil, upstream.Malformed(c.Label(), "sites", fmt.Errorf("a site without id"))
			}
		}
		out = append(out, page.Value...)
		if page.NextLink == "" {
			return out, nil
		}
		if pages >= 50 {
			// A vendor fault that links pages for ever must not hold
			// the consent's callback.
			return nil, upstream.Malformed(c.Label(), "sites", fmt.Errorf("more than 50 pages of sites"))
		}
		link, err := c.Relative(page.NextLink)
		if err != nil {
			return nil, upstream.Malformed(c.Label(), "sites", err)
		}
		req = upstream.Request{Path: link}
	}
}
