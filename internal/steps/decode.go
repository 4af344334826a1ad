package steps

import (
	"encoding/json"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/jsonenc"
)

// decodePayload decodes a Task's payload as json.Unmarshal does. The
// payloads of the operation and cleanup workflows (compact objects of
// strings without escapes: what the local engine and Step Functions send)
// take a short way that copies the text once and makes every field a part
// of that copy, where json.Unmarshal allocates its state and each string;
// anything else (other fields, numbers, escapes, spaces, keys in another
// case) takes json.Unmarshal (TestDecodePayloadIsJSONUnmarshal,
// FuzzDecodePayload compare the two).
func decodePayload(data []byte) (Payload, error) {
	if p, ok := decodeShort(data); ok {
		return p, nil
	}
	var p Payload
	err := json.Unmarshal(data, &p)
	return p, err
}

// decodeShort is decodePayload's short way; ok is false when it does not
// apply.
func decodeShort(data []byte) (p Payload, ok bool) {
	s := jsonenc.NewScanner(data, jsonenc.ScanOptions{})
	s.Enter('{')
	for key, ok := s.Key(); ok; key, ok = s.Key() {
		switch string(key) {
		case "step":
			p.Step, _ = s.String()
		case "operation_id":
			p.OperationID, _ = s.String()
		case "instance_id":
			p.InstanceID, _ = s.String()
		case "detached_id":
			p.DetachedID, _ = s.String()
		case "campaign_id":
			p.CampaignID, _ = s.String()
		case "error":
			p.Error, _ = s.String()
		case "cause":
			p.Cause, _ = s.String()
		case "execution_input":
			// A key twice: json.Unmarshal decodes into the value it has.
			in := p.ExecutionInput
			if in == nil {
				in = &broker.WorkflowInput{}
			}
			p.ExecutionInput = in
			s.Enter('{')
			for key, ok := s.Key(); ok; key, ok = s.Key() {
				switch string(key) {
				case "instance_id":
					in.InstanceID, _ = s.String()
				case "binding_id":
					in.BindingID, _ = s.String()
				case "kind":
					k, _ := s.String()
					in.Kind = broker.OperationKind(k)
				default:
					s.Fail()
				}
			}
		default:
			s.Fail()
		}
	}
	return p, s.End()
}
