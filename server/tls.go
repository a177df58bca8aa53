package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/auth"
	"github.com/zxfs/zx/proto"
)

// handshake runs the TLS handshake on nc and looks up the client's key.
// It returns the TLS connection and the key's grant, or false if the
// client was refused (it has been told why, and nc is closed).
func (s *Server) handshake(nc net.Conn) (net.Conn, *auth.Grant, bool) {
	// Until it is served, a shutdown closes nc rather than wait for the
	// handshake to time out.
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		nc.Close()
		return nil, nil, false
	}
	if len(s.pending) >= s.cfg.MaxConns {
		// A flood of handshakes: each costs a goroutine and a key
		// exchange, so at most MaxConns are under way; the rest are
		// dropped before any work.
		s.mu.Unlock()
		s.log.Warn("connection dropped: too many TLS handshakes under way", "remote", nc.RemoteAddr(), "limit", s.cfg.MaxConns)
		nc.Close()
		return nil, nil, false
	}
	if s.pending == nil {
		s.pending = make(map[net.Conn]struct{})
	}
	s.pending[nc] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, nc)
		s.mu.Unlock()
	}()
	remote := nc.RemoteAddr()
	timeout := s.cfg.HandshakeTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	tc := tls.Server(nc, s.cfg.TLS)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		var rhe tls.RecordHeaderError
		if errors.As(err, &rhe) && rhe.Conn != nil {
			// Not TLS: most likely a zx client speaking plain. Tell
			// it so in its own protocol.
			s.log.Info("refused a client not speaking TLS", "remote", remote)
			refusePlain(rhe.Conn)
		} else {
			s.log.Info("TLS handshake failed", "remote", remote, "err", err)
		}
		nc.Close()
		return nil, nil, false
	}
	pub, err := auth.PeerKey(tc.ConnectionState())
	if err != nil {
		err = &auth.AuthError{Msg: "no client key: this server admits only authorized keys (" + err.Error() + "); make one with zx keygen"}
		if len(tc.ConnectionState().PeerCertificates) == 0 {
			err = &auth.AuthError{Msg: "no client key presented: this server admits only authorized keys; make one with zx keygen and send its public key to the server's administrator"}
		}
	}
	var grant *auth.Grant
	if err == nil && s.cfg.Authorized != nil {
		grant, err = s.cfg.Authorized.Lookup(pub, time.Now())
	}
	if err != nil {
		fp := ""
		if pub != nil {
			fp = auth.Fingerprint(pub)
		}
		s.log.Warn("refused a client key", "remote", remote, "key", fp, "why", err)
		refuse(tc, zx.E(zx.ErrAuth, "", "", err.Error()))
		return nil, nil, false
	}
	if grant != nil {
		s.log.Info("authenticated", "remote", remote, "user", grant.User, "key", grant.Fingerprint)
	}
	return tc, grant, true
}

// refusePlain answers a client that does not speak TLS.
func refusePlain(nc net.Conn) {
	refuse(nc, zx.E(zx.ErrAuth, "", "", "this server speaks only TLS: connect with TLS "+
		"(zx commands do so for any address but loopback, and with --tls for loopback)"))
}

// refuse sends a hello and a goaway with err, and closes nc once the
// client has read them: it ends its side, and reads what the client sent
// until it closes too (or a few seconds pass), so that closing with unread
// data does not reset the connection before the client has read why.
func refuse(nc net.Conn, err error) {
	b := proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, &proto.Hello{Version: proto.Version}))
	b = proto.AppendFrame(b, proto.Header{Type: proto.FGoaway}, proto.AppendError(nil, err))
	nc.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := nc.Write(b); err == nil {
		if cw, ok := nc.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, nc)
	}
	nc.Close()
}
