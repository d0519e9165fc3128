package chatdb

import (
	"fmt"
	"slices"

	"howett.net/plist"
)

// message_summary_info is a property list (binary on a real Mac) that
// Messages keeps on a message whose parts changed after it was sent (macOS
// 13 and later): "ec" the edit history of each part, "ep" the parts
// edited, "otr" each part's range in the original text, and "rp" the parts
// its sender took back. A part is a run of the body that
// __kIMMessagePartAttributeName numbers: each attachment's U+FFFC
// placeholder, and the text. Only "rp" is read here; part_count, beside
// it, counts the parts left.

// summaryInfo is what is read of a message_summary_info.
type summaryInfo struct {
	RetractedParts []int `plist:"rp"`
}

// retractedParts returns the indexes of the parts taken back that a
// message_summary_info lists, sorted, without duplicates; nil when none.
func retractedParts(blob []byte) ([]int, error) {
	var info summaryInfo
	if _, err := plist.Unmarshal(blob, &info); err != nil {
		return nil, fmt.Errorf("chatdb: read message_summary_info: %w", err)
	}
	parts := slices.DeleteFunc(info.RetractedParts, func(p int) bool { return p < 0 })
	slices.Sort(parts)
	return slices.Clip(slices.Compact(parts)), nil
}
