package chatdbtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// WriteLongUsed fills fx with n message rows as a long-used Mac has them:
// 400 one-to-one chats (some SMS, some with an email address) and 40
// groups, used unevenly (a few chats hold most rows); both directions;
// dates over two years, the last 4,000 rows in the last week; 3% tapbacks,
// 2% inline replies, 2% attachments (their files are not on the disk), a
// third of the bodies in attributedBody only (text NULL, as Ventura and
// later write them).
func WriteLongUsed(fx *Fixture, n int) {
	rng := rand.New(rand.NewPCG(20240601, uint64(n)))
	words := strings.Fields("ok yes no maybe see you soon tomorrow tonight call me later lunch dinner coffee " +
		"thanks sounds good running late on my way home work meeting weekend plans photo look at this haha " +
		"love it great idea where are you when can we talk about the trip flight hotel train")
	sentence := func() string {
		s := make([]string, 1+rng.IntN(18))
		for i := range s {
			s[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(s, " ")
	}
	type chatInfo struct {
		ref     ChatRef
		members []string
		last    []string // recent GUIDs, for tapbacks and replies
	}
	var chats []*chatInfo
	var contacts []string
	fx.Batch(func() {
		for i := range 400 {
			addr := fmt.Sprintf("+1555%07d", 2000000+i*37)
			if i%10 == 9 {
				addr = fmt.Sprintf("friend%d@example.com", i)
			}
			contacts = append(contacts, addr)
			service := "imessage"
			if i%7 == 3 {
				service = "sms"
			}
			chats = append(chats, &chatInfo{ref: fx.DirectChat(service, addr), members: []string{addr}})
		}
		for i := range 40 {
			members := make([]string, 2+rng.IntN(7))
			for j := range members {
				members[j] = contacts[rng.IntN(len(contacts))]
			}
			slices.Sort(members)
			members = slices.Compact(members)
			name := ""
			if i%3 != 0 {
				name = fmt.Sprintf("Group %d", i)
			}
			chats = append(chats, &chatInfo{ref: fx.GroupChat("imessage", name, members...), members: members})
		}
	})
	// Chat k gets a share of the rows proportional to 1/(k+1): the first
	// chats hold most of them, as on a real Mac.
	rng.Shuffle(len(chats), func(i, j int) { chats[i], chats[j] = chats[j], chats[i] })
	cum := make([]float64, len(chats))
	total := 0.0
	for k := range chats {
		total += 1 / float64(k+1)
		cum[k] = total
	}
	pick := func() *chatInfo {
		i, _ := slices.BinarySearch(cum, rng.Float64()*total)
		return chats[min(i, len(chats)-1)]
	}
	now := time.Now()
	first, weekAgo := now.Add(-730*24*time.Hour), now.Add(-7*24*time.Hour)
	lastWeek := min(4000, n/10)
	dateOf := func(i int) time.Time {
		if i < n-lastWeek {
			return first.Add(time.Duration(float64(weekAgo.Sub(first)) * float64(i) / float64(n-lastWeek)))
		}
		j := i - (n - lastWeek)
		return weekAgo.Add(time.Duration(float64(now.Add(-10*time.Minute).Sub(weekAgo)) * float64(j) / float64(lastWeek)))
	}
	const batch = 20000
	for start := 0; start < n; start += batch {
		fx.Batch(func() {
			for i := start; i < min(start+batch, n); i++ {
				c := pick()
				m := Msg{Chat: c.ref, Date: dateOf(i), Ventura: rng.IntN(3) == 0}
				if rng.IntN(100) < 45 {
					m.IsSent = true // ours, sent
				} else {
					m.From = c.members[rng.IntN(len(c.members))]
				}
				switch r := rng.IntN(100); {
				case r < 3 && len(c.last) > 0:
					m.ReactionTo = c.last[rng.IntN(len(c.last))]
					m.ReactionType = 2000 + rng.IntN(6)
					m.Text = "Loved “" + sentence() + "”"
				case r < 5:
					name := fmt.Sprintf("IMG_%04d.jpeg", rng.IntN(10000))
					m.Attachments = []FileSpec{{
						Path:     fmt.Sprintf("~/Library/Messages/Attachments/%02x/%02d/%d/%s", rng.IntN(256), rng.IntN(100), i, name),
						MimeType: "image/jpeg", TransferName: name, UTI: "public.jpeg", TotalBytes: int64(100000 + rng.IntN(3000000)),
					}}
					if rng.IntN(2) == 0 {
						m.Text = sentence()
					}
				case r < 7 && len(c.last) > 0:
					m.ReplyTo = c.last[rng.IntN(len(c.last))]
					m.Text = sentence()
				default:
					m.Text = sentence()
				}
				_, guid := fx.Insert(m)
				if m.ReactionTo == "" {
					if len(c.last) == 8 {
						c.last = c.last[1:]
					}
					c.last = append(c.last, guid)
				}
			}
		})
	}
}
