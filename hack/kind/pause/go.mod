module llmbench.local/kindpause

go 1.25
