package vendortest

import (
	"fmt"
	"time"
)

// DocFile is a file in a practice's document store, with the kind the
// filing conventions should read from where it is.
type DocFile struct {
	Path     string // from the store's root
	Client   string // the client folder's name
	Kind     string
	Size     int64
	MimeType string
	Modified time.Time
}

// PracticeFiles lays out clients' folders under root the way practices
// file them: <root>/<client>/<year>/<kind folder>/<file>, nine files a
// client, modified an hour apart.
func PracticeFiles(root string, clients int, at time.Time) []DocFile {
	const pdf, xlsx, docx = "application/pdf", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
		"application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	var out []DocFile
	n := 0
	for i := range clients {
		client := fmt.Sprintf("Client %02d Ltd", i)
		for _, f := range []struct{ rel, kind, mime string }{
			{"2025/Engagement letters/Engagement letter 2025 - " + client + ".pdf", "engagement_letter", pdf},
			{"2025/Engagement letters/Engagement letter 2025 - " + client + " (signed).pdf", "signed_engagement_letter", pdf},
			{"2025/Identity/Passport - Ann Smith.pdf", "identity_verification", pdf},
			{"2024/Source documents/Bank statements March 2024.pdf", "source_document", pdf},
			{"2024/Working papers/Trial balance 2024.xlsx", "working_paper", xlsx},
			{"2024/Accounts/Financial statements 2024.pdf", "financial_statements", pdf},
			{"2024/Tax return/CT600 2024.pdf", "tax_return", pdf},
			{"2025/Correspondence/HMRC letter 2025-03-01.pdf", "correspondence", pdf},
			{"2025/Other/Meeting notes 2025-02-11.docx", "other", docx},
		} {
			out = append(out, DocFile{Path: root + "/" + client + "/" + f.rel, Client: client, Kind: f.kind,
				Size: int64(40_000 + n), MimeType: f.mime, Modified: at.Add(time.Duration(n) * time.Hour)})
			n++
		}
	}
	return out
}
